//! A mock of the Messages API for driving the real `claude` CLI offline. It
//! answers `POST /v1/messages` with server-sent events (`message_start`,
//! `content_block_*`, `message_delta`, `message_stop`): while commands are
//! queued, a request that offers the Bash tool gets a `tool_use` of the next
//! one; everything else (the last turn, titles, summaries) gets a short
//! `end_turn`. It records, per request, the path, the credential headers,
//! the `tool_result` the request carries back and when it arrived, and when
//! each `tool_use` answer was sent: the time Claude Code took for one Bash
//! call, seen from the API's side (the benchmark's Claude Code row).
//!
//! Shared by the end-to-end tests and `hack/bench`, so it depends on
//! serde_json alone.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub api_key: Option<String>,
    pub authorization: Option<String>,
    /// The text of the tool_result in the request's last message, if any.
    pub tool_result: Option<String>,
    /// The id of the tool_use that tool_result answers.
    pub tool_use_id: Option<String>,
    /// When the request had been read whole.
    pub at: Instant,
}

#[derive(Default)]
struct State {
    commands: VecDeque<String>,
    seen: Vec<Seen>,
    /// Each tool_use answer's id and when its last byte was written.
    sent: Vec<(String, Instant)>,
    next_id: u32,
}

pub struct MockApi {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl MockApi {
    /// Listens on 127.0.0.1 (a free port) until the test process ends.
    pub fn start(commands: &[&str]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            commands: commands.iter().map(|c| c.to_string()).collect(),
            ..State::default()
        }));
        let s = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
        });
        Self { port, state }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Queues more commands (for a second run against the same mock).
    pub fn queue(&self, commands: &[&str]) {
        let mut st = self.state.lock().unwrap();
        st.commands.extend(commands.iter().map(|c| c.to_string()));
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// The tool_results received so far, in order.
    pub fn tool_results(&self) -> Vec<String> {
        self.seen().into_iter().filter_map(|s| s.tool_result).collect()
    }

    /// For each tool_use answered so far, in order: the time from its last
    /// byte sent to the arrival of the request carrying its tool_result,
    /// which is all Claude Code did for that call (run the command, read its
    /// output, build the next request). None for a call with no result yet.
    pub fn call_times(&self) -> Vec<Option<Duration>> {
        let st = self.state.lock().unwrap();
        st.sent
            .iter()
            .map(|(id, sent)| {
                st.seen
                    .iter()
                    .find(|s| s.tool_use_id.as_deref() == Some(id))
                    .map(|s| s.at.saturating_duration_since(*sent))
            })
            .collect()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let (mut length, mut api_key, mut authorization) = (0usize, None, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        let Some((name, value)) = h.trim_end().split_once(':') else {
            continue;
        };
        let value = value.trim().to_owned();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().unwrap_or(0),
            "x-api-key" => api_key = Some(value),
            "authorization" => authorization = Some(value),
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let at = Instant::now();
    let req: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    let (tool_use_id, tool_result) = last_tool_result(&req).unzip();
    let (content_type, answer, tool_use) = {
        let mut st = state.lock().unwrap();
        st.seen.push(Seen {
            path: path.clone(),
            api_key,
            authorization,
            tool_result,
            tool_use_id: tool_use_id.flatten(),
            at,
        });
        if path.starts_with("/v1/messages/count_tokens") {
            ("application/json", json!({"input_tokens": 1}).to_string(), None)
        } else {
            let offers_bash = req["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "Bash"));
            let next = if offers_bash { st.commands.pop_front() } else { None };
            st.next_id += 1;
            let id = st.next_id;
            ("text/event-stream", events(&req, next.as_deref(), id), next.map(|_| id))
        }
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let _ = stream.flush();
    if let Some(id) = tool_use {
        state.lock().unwrap().sent.push((tool_use_id_of(id), Instant::now()));
    }
}

fn tool_use_id_of(n: u32) -> String {
    format!("toolu_{n}")
}

/// The tool_use id and the text of the tool_result in the last message.
fn last_tool_result(req: &Value) -> Option<(Option<String>, String)> {
    let last = req["messages"].as_array()?.last()?;
    let block = last["content"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "tool_result")?;
    let id = block["tool_use_id"].as_str().map(str::to_owned);
    Some((
        id,
        match &block["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            other => other.to_string(),
        },
    ))
}

fn events(req: &Value, command: Option<&str>, id: u32) -> String {
    let mut out = String::new();
    let mut ev = |name: &str, data: Value| out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{id}"), "type": "message",
            "role": "assistant", "model": req["model"].as_str().unwrap_or("mock"), "content": [],
            "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    );
    let stop = match command {
        Some(cmd) => {
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block":
                    {"type": "tool_use", "id": tool_use_id_of(id), "name": "Bash", "input": {}}}),
            );
            let input = json!({"command": cmd, "description": "test command"}).to_string();
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": input}}),
            );
            "tool_use"
        }
        None => {
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "mock done"}}),
            );
            "end_turn"
        }
    };
    ev("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 1}}),
    );
    ev("message_stop", json!({"type": "message_stop"}));
    out
}
