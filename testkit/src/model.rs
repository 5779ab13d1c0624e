//! Stand-ins for the assistant's loop: a model that answers from a
//! script, and hosts standing in for the Warden.

use aromba::assistant::conversation::{Host, Limits};
use aromba::assistant::model::{Message, Model, ModelError, Reply, ToolCall, Usage};
use std::sync::Mutex;

/// No budget and no prod mode: the loop's own bounds alone.
pub const NO_LIMITS: Limits = Limits {
    prod_mode: false,
    tokens_left: None,
};

/// A model that answers from a script (the last reply repeated).
pub struct Scripted {
    pub replies: Mutex<Vec<Reply>>,
    pub seen: Mutex<Vec<Vec<Message>>>,
}

impl Scripted {
    pub fn new(replies: Vec<Reply>) -> Scripted {
        Scripted {
            replies: Mutex::new(replies.into_iter().rev().collect()),
            seen: Mutex::new(Vec::new()),
        }
    }
}

impl Model for Scripted {
    async fn complete(
        &self,
        messages: &[Message],
        _tools: Option<&serde_json::Value>,
    ) -> Result<Reply, ModelError> {
        self.seen.lock().unwrap().push(messages.to_vec());
        let mut r = self.replies.lock().unwrap();
        Ok(if r.len() > 1 {
            r.pop().unwrap()
        } else {
            r.last().cloned().unwrap()
        })
    }
}

/// A server that answers every read with `output` and keeps the progress
/// lines the loop asked for.
#[derive(Default)]
pub struct Server {
    pub output: String,
    pub progress: Mutex<Vec<String>>,
    pub reads: Mutex<usize>,
    pub chore_lists: Mutex<usize>,
}

impl Host for Server {
    async fn read(&self, _cmd: String, _args: Vec<String>) -> Result<String, String> {
        *self.reads.lock().unwrap() += 1;
        Ok(self.output.clone())
    }
    async fn chores(&self) -> Vec<String> {
        *self.chore_lists.lock().unwrap() += 1;
        vec!["apt-clean".into()]
    }
    async fn progress(&self, tools: &[String]) {
        self.progress.lock().unwrap().extend(tools.iter().cloned());
    }
}

pub fn reply(calls: &[(&str, &str)], usage: Usage) -> Reply {
    Reply {
        text: String::new(),
        calls: calls
            .iter()
            .enumerate()
            .map(|(i, (n, a))| ToolCall {
                id: format!("c{i}"),
                name: n.to_string(),
                arguments: a.to_string(),
            })
            .collect(),
        usage,
    }
}

pub fn text(t: &str, usage: Usage) -> Reply {
    Reply {
        text: t.into(),
        calls: vec![],
        usage,
    }
}

/// A host with nothing to read and no chores.
pub struct Quiet;

impl Host for Quiet {
    async fn read(&self, _cmd: String, _args: Vec<String>) -> Result<String, String> {
        Ok(String::new())
    }
    async fn chores(&self) -> Vec<String> {
        Vec::new()
    }
}
