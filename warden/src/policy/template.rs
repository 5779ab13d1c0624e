//! The `<template>` value of docker's `--format`: a strict parser, not a
//! pattern. A Go template can re-encode what it prints (`urlquery`, `js`,
//! `html`, `printf "%x"`, `base64`, `slice`, `index`, `len`, `print`, `call`,
//! pipelines, variables), and a redactor sees only the text as written: a
//! URL-encoded password passes it untouched. So the only templates accepted
//! are the ones that print docker's fields as docker writes them:
//!
//! - `json` (docker's own JSON lines) or `table` (its default table);
//! - otherwise an optional `table ` prefix, then literal text and field
//!   references: `{{.Field}}`, `{{.Field.Sub}}`, with optional spaces inside
//!   the braces (`{{ .Names }}`).
//!
//! A field reference is `.` and an identifier, repeated; nothing else may
//! stand between `{{` and `}}` — no function name, argument, pipe `|`,
//! variable `$`, parenthesis, string, trim marker (`{{-`, `-}}`), comment
//! or keyword (`if`, `range`, `with`, `define`, `template`, `block`).
//!
//! And the reference must be one of docker's own placeholders, [`FIELDS`]:
//! a Go template calls a method as readily as it reads a field, and
//! docker's formatting contexts have methods that re-encode — `{{.MarshalJSON}}`
//! on `docker ps` prints the container's JSON as an array of byte numbers,
//! its command line with a password in it included, which no redactor
//! reads; a struct printed whole prints its byte slices the same way. So a
//! name is accepted only when docker documents it as a placeholder of a
//! command the policy allows and what it prints is text (a string, a
//! number, a list of strings). The
//! literal text holds letters, digits, space and `_.,:;|()[]"'/\+=-#%@!?<>*&~^`
//! (docker turns `\t` and `\n` into a tab and a newline); a lone `{` or `}`
//! is refused so no action can be spelled another way.

#![forbid(unsafe_code)]

/// At most this many bytes.
pub const MAX_TEMPLATE: usize = 256;

/// The field references a template may hold: docker's placeholders for the
/// commands the policy allows (its `--format` documentation), each printing
/// text. A name valid for one command and absent from another's context
/// makes docker refuse the template, so one list serves them all; every
/// name here prints text in each context that has it.
pub const FIELDS: &[&str] = &[
    // docker ps
    "ID",
    "Image",
    "Command",
    "CreatedAt",
    "RunningFor",
    "Ports",
    "State",
    "Status",
    "Size",
    "Names",
    "Labels",
    "Mounts",
    "Networks",
    "LocalVolumes",
    // docker images
    "Repository",
    "Tag",
    "Digest",
    "CreatedSince",
    "Containers",
    "SharedSize",
    "UniqueSize",
    "VirtualSize",
    // docker stats
    "Container",
    "Name",
    "CPUPerc",
    "MemUsage",
    "MemPerc",
    "NetIO",
    "BlockIO",
    "PIDs",
    // docker system df
    "Type",
    "TotalCount",
    "Active",
    "Reclaimable",
    // docker version
    "Client.Version",
    "Client.APIVersion",
    "Client.GoVersion",
    "Client.GitCommit",
    "Client.BuildTime",
    "Client.Os",
    "Client.Arch",
    "Client.Context",
    "Server.Version",
    "Server.APIVersion",
    "Server.MinAPIVersion",
    "Server.GitCommit",
    "Server.GoVersion",
    "Server.Os",
    "Server.Arch",
    "Server.KernelVersion",
    "Server.BuildTime",
    // docker info
    "ServerVersion",
    "OperatingSystem",
    "OSType",
    "OSVersion",
    "Architecture",
    "KernelVersion",
    "NCPU",
    "MemTotal",
    "DockerRootDir",
    "Driver",
    "LoggingDriver",
    "CgroupDriver",
    "CgroupVersion",
    "ContainersRunning",
    "ContainersPaused",
    "ContainersStopped",
    "Images",
    "Warnings",
    "Swarm.LocalNodeState",
    "Swarm.NodeID",
    "Swarm.NodeAddr",
];

/// Why a template is refused, for the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateRefusal(pub String);

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn is_literal(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b" _.,:;|()[]\"'/\\+=-#%@!?<>*&~^".contains(&c)
}

fn trim_spaces(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ').unwrap_or(s.len());
    let end = s.iter().rposition(|&b| b != b' ').map_or(start, |e| e + 1);
    &s[start..end]
}

/// Parses one action's inside (between `{{` and `}}`): spaces, one or more
/// `.Ident`, spaces.
fn field_reference(inside: &[u8]) -> Result<(), TemplateRefusal> {
    let body = trim_spaces(inside);
    if inside.first() == Some(&b'-') || inside.last() == Some(&b'-') {
        return Err(TemplateRefusal(
            "a trim marker ({{- or -}}) is refused".into(),
        ));
    }
    if body.is_empty() {
        return Err(TemplateRefusal("an empty action {{}} is refused".into()));
    }
    let mut i = 0;
    while i < body.len() {
        if body[i] != b'.' {
            return Err(TemplateRefusal(format!(
                "only field references such as {{{{.Names}}}} are allowed, not {{{{{}}}}}",
                String::from_utf8_lossy(inside)
            )));
        }
        i += 1;
        if !body.get(i).copied().is_some_and(is_ident_start) {
            return Err(TemplateRefusal(format!(
                "{{{{{}}}}} is not a field reference (a dot and a field name)",
                String::from_utf8_lossy(inside)
            )));
        }
        while body.get(i).copied().is_some_and(is_ident) {
            i += 1;
        }
    }
    // Only ASCII was consumed above, so this is the path as written.
    let path = String::from_utf8_lossy(&body[1..]);
    if !FIELDS.contains(&path.as_ref()) {
        return Err(TemplateRefusal(format!(
            "{{{{.{path}}}}} is not one of docker's placeholders the policy lists (a method such as MarshalJSON re-encodes what it prints)"
        )));
    }
    Ok(())
}

/// Judges a docker `--format` value.
pub fn check(t: &str) -> Result<(), TemplateRefusal> {
    if t.is_empty() || t.len() > MAX_TEMPLATE {
        return Err(TemplateRefusal(format!(
            "a template is 1 to {MAX_TEMPLATE} bytes"
        )));
    }
    if t == "json" || t == "table" {
        return Ok(());
    }
    let body = t.strip_prefix("table ").unwrap_or(t).as_bytes();
    let mut i = 0;
    while i < body.len() {
        if body[i..].starts_with(b"{{") {
            let Some(len) = body[i + 2..].windows(2).position(|w| w == b"}}") else {
                return Err(TemplateRefusal("an action {{ is not closed".into()));
            };
            field_reference(&body[i + 2..i + 2 + len])?;
            i += 2 + len + 2;
            continue;
        }
        let c = body[i];
        if !is_literal(c) {
            return Err(TemplateRefusal(format!(
                "{:?} is not allowed in a template's text",
                char::from(c)
            )));
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn field_references_literals_table_and_json_pass() {
        for ok in [
            "json",
            "table",
            "{{.Names}}",
            "{{ .Names }}",
            "table {{.ID}}\\t{{.Names}}\\t{{.Status}}",
            "{{.Names}}: {{.State}} ({{.RunningFor}})",
            "{{.Swarm.NodeID}}",
            "{{.Server.Version}} {{.Client.Version}}",
            "name=\"{{.Names}}\" size={{.Size}}",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn anything_else_inside_an_action_is_refused() {
        for bad in [
            "{{urlquery .Command}}",
            "{{.Command | urlquery}}",
            "{{json .}}",
            "{{.}}",
            "{{}}",
            "{{ }}",
            "{{- .Names}}",
            "{{.Names -}}",
            "{{$x := .Names}}{{$x}}",
            "{{.Label \"a\"}}",
            "{{(.Names)}}",
            "{{if .Names}}x{{end}}",
            "{{/* c */}}",
            "{{.Names",
            "{{..Names}}",
            "{{.1}}",
            "{{.Names.}}",
            "{{.MarshalJSON}}",
            "{{ .MarshalJSON }}",
            "{{.Swarm}}",
            "{{.Server}}",
            "{{.Names.String}}",
            "{{.Server.Components}}",
            "{{.Swarm.Cluster.TLSInfo}}",
            "x { y",
            "x } y",
            "{{.Names}}}",
            "{{{.Names}}}",
            "a\u{e9}b",
            "$HOME",
        ] {
            assert!(check(bad).is_err(), "{bad} was accepted");
        }
    }
}
