//! The relay's SQL lives in `relay/src/store/`, one module per table:
//! handlers, the hub, the writers and the sweep call its functions and
//! hold no statement of their own. These tests read the sources; they need
//! no database.
//!
//! No exception is made: even the statements that touch none of the
//! relay's tables (a transaction's lock wait, the sender's and poller's
//! advisory lock, the readiness check's read of sqlx's migrations table)
//! live in `store/mod.rs`. `db.rs` keeps `sqlx::migrate!`, which runs the
//! migrations and is no statement.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// Where `text` sends SQL, each as a short description: any `query…!`
/// macro of sqlx (`query!`, `query_as!`, `query_scalar!`, their
/// `_unchecked` and `file` forms), a `sqlx::query…` or `sqlx::raw_sql`
/// function, a `QueryBuilder`, an executor's method handed a string
/// directly, or a `use sqlx::…` that brings one of these in unprefixed.
fn statements(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for (at, _) in text.match_indices("query") {
        if text[..at].chars().next_back().is_some_and(ident) {
            continue;
        }
        let name: String = text[at..].chars().take_while(|c| ident(*c)).collect();
        if text[at + name.len()..].starts_with('!') {
            found.push(format!("{name}!"));
        }
    }
    for needle in ["sqlx::query", "sqlx::raw_sql", "QueryBuilder"] {
        if text.contains(needle) {
            found.push(needle.to_string());
        }
    }
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    for method in [
        ".execute(",
        ".fetch(",
        ".fetch_one(",
        ".fetch_optional(",
        ".fetch_all(",
    ] {
        for quote in ["\"", "r\"", "r#\""] {
            if squeezed.contains(&format!("{method}{quote}")) {
                found.push(format!("{method}<a string>)"));
            }
        }
    }
    for (at, _) in squeezed.match_indices("usesqlx::") {
        let statement = squeezed[at..].split(';').next().unwrap_or("");
        if ["query", "raw_sql", "QueryBuilder"]
            .iter()
            .any(|n| statement.contains(n))
        {
            found.push(format!("{statement};"));
        }
    }
    found
}

#[test]
fn sql_lives_only_in_the_store_modules() {
    let src = src();
    let store = src.join("store");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut outside = Vec::new();
    let mut inside = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source");
        let found = statements(&text);
        if file.starts_with(&store) {
            inside += found.len();
        } else if !found.is_empty() {
            let name = file.strip_prefix(&src).unwrap_or(file).display();
            outside.push(format!("relay/src/{name}: {}", found.join(", ")));
        }
    }
    assert!(
        outside.is_empty(),
        "SQL outside relay/src/store/ (move it into the store module of the \
         table it writes, or mainly reads):\n{}",
        outside.join("\n")
    );
    // Not vacuous: the walk found the store and the statements in it.
    assert!(files.len() > 20, "only {} sources found", files.len());
    assert!(inside > 50, "only {inside} statements found in the store");
}

/// Each of the relay's tables has its module, named for it, and each
/// module opens by saying what its table holds and who writes it.
#[test]
fn every_table_has_one_store_module_that_says_what_it_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut tables = Vec::new();
    let mut migrations: Vec<PathBuf> = std::fs::read_dir(root.join("migrations"))
        .expect("migrations/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    migrations.sort();
    for migration in migrations {
        let text = std::fs::read_to_string(&migration).expect("a migration");
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("CREATE TABLE ") {
                let name = rest.split([' ', '(']).next().unwrap_or("");
                tables.push(name.to_string());
            }
        }
    }
    tables.sort();
    let store = src().join("store");
    let mut modules = Vec::new();
    let mut files = Vec::new();
    rust_files(&store, &mut files);
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source");
        assert!(
            text.starts_with("//! "),
            "{} does not open with a //! doc",
            file.display()
        );
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if stem != "mod" {
            assert!(
                text.starts_with(&format!("//! `{stem}`")),
                "{} does not open by naming its table",
                file.display()
            );
            modules.push(stem.to_string());
        }
    }
    modules.sort();
    assert!(tables.len() > 10, "only {} tables found", tables.len());
    assert_eq!(modules, tables, "the store's modules and the tables differ");
}

/// The reading above sees every form a statement takes, and not a word
/// that merely contains "query".
#[test]
fn the_store_gate_sees_every_form_of_a_statement() {
    let caught = [
        r#"sqlx::query!("DELETE FROM outbox")"#,
        r#"sqlx::query_as!(Row, "SELECT 1")"#,
        r#"sqlx::query_scalar!("SELECT 1")"#,
        r#"query_scalar_unchecked!("SELECT 1")"#,
        r#"query_file!("q.sql")"#,
        r#"sqlx::query("SELECT 1")"#,
        r#"sqlx::query_scalar("SELECT 1")"#,
        r#"sqlx::raw_sql("SELECT 1")"#,
        "let b = QueryBuilder::new(\"x\");",
        "db.execute(\n    \"DELETE FROM outbox\",\n)",
        "conn.fetch_one(r#\"SELECT 1\"#)",
        "use sqlx::{PgPool, query};",
        "use sqlx::query_as;",
    ];
    for text in caught {
        assert!(!statements(text).is_empty(), "not caught: {text}");
    }
    let passed = [
        "let query = callback_query_id;",
        "fn on_query(q: &CallbackQuery) {}",
        "sqlx::migrate!(\"../migrations\")",
        "store::outbox::count(&app.db).await?",
        "use sqlx::PgPool;",
        "db.execute(statement)",
    ];
    for text in passed {
        assert!(statements(text).is_empty(), "wrongly caught: {text}");
    }
}
