//! The request body, judged before it goes up: JSON with the fields of a
//! Messages request, and none of the server-side features with which the API
//! would act on the network or on stored data for the agent (the MCP
//! connector, web fetch, code execution, the Files API) unless the policy's
//! `[claude] server_tools` names the feature. Parsed once; the gateway then
//! sends the bytes as they came. Pure logic.

use claude_shim_bundle::policy::values::ServerTool;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The top-level fields of a Messages (or count_tokens) request that ask
/// the API for nothing beyond the model's answer.
const FIELDS: &[&str] = &[
    "model",
    "messages",
    "system",
    "max_tokens",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_k",
    "top_p",
    "tools",
    "tool_choice",
    "thinking",
    "context_management",
    "output_config",
    "output_format",
    "service_tier",
    "speed",
    "inference_geo",
];

/// Top-level fields that turn on a server-side feature.
const FEATURE_FIELDS: &[(&str, ServerTool)] = &[
    ("mcp_servers", ServerTool::Mcp),
    ("container", ServerTool::CodeExecution),
];

/// Typed tools (`{"type": "..."}`) the API runs itself, by type prefix.
const SERVER_TOOLS: &[(&str, ServerTool)] = &[
    ("web_search_", ServerTool::WebSearch),
    ("web_fetch_", ServerTool::WebFetch),
    ("code_execution_", ServerTool::CodeExecution),
    ("tool_search_tool_", ServerTool::ToolSearch),
    ("mcp_toolset", ServerTool::Mcp),
];

/// Typed tools the client runs (the API only describes them to the model).
const CLIENT_TOOLS: &[&str] = &["custom", "bash_", "text_editor_", "computer_", "memory_"];

/// Why a body is refused: the field, and whether the policy could allow it.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub needs: Option<ServerTool>,
    pub why: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.why)?;
        if let Some(t) = self.needs {
            write!(
                f,
                " (the policy's [claude] server_tools does not list {t:?})",
                t = t.as_str()
            )?;
        }
        Ok(())
    }
}

/// Judges a request body against the server tools `allowed`.
pub fn judge(body: &[u8], allowed: &[ServerTool]) -> Result<(), Refusal> {
    let refuse = |field: &str, why: &str| Refusal {
        field: field.to_owned(),
        needs: None,
        why: why.to_owned(),
    };
    let v = serde_json::from_slice::<Strict>(body)
        .map_err(|e| refuse("body", &format!("not JSON: {e}")))?
        .0;
    let Value::Object(top) = &v else {
        return Err(refuse("body", "not a JSON object"));
    };
    let need = |field: String, tool: ServerTool, why: &str| {
        if allowed.contains(&tool) {
            Ok(())
        } else {
            Err(Refusal {
                field,
                needs: Some(tool),
                why: why.to_owned(),
            })
        }
    };
    for key in top.keys() {
        if let Some((_, tool)) = FEATURE_FIELDS.iter().find(|(f, _)| f == key) {
            need(key.clone(), *tool, "asks the API to act for the agent")?;
        } else if !FIELDS.contains(&key.as_str()) {
            return Err(refuse(
                &shown(key),
                "not a field of a Messages request the gateway forwards",
            ));
        }
    }
    if let Some(tools) = top.get("tools").and_then(Value::as_array) {
        for (i, tool) in tools.iter().enumerate() {
            let Some(ty) = tool.get("type").and_then(Value::as_str) else {
                continue;
            };
            let field = format!("tools[{i}].type {:?}", shown(ty));
            match SERVER_TOOLS.iter().find(|(p, _)| ty.starts_with(p)) {
                Some((_, t)) => need(field, *t, "is a tool the API runs itself")?,
                None if CLIENT_TOOLS
                    .iter()
                    .any(|p| ty == *p || (p.ends_with('_') && ty.starts_with(p))) => {}
                None => return Err(refuse(&field, "is not a tool type the gateway knows")),
            }
        }
    }
    if let Some(system) = top.get("system").and_then(Value::as_array) {
        blocks(system, "system", &need)?;
    }
    if let Some(messages) = top.get("messages").and_then(Value::as_array) {
        for (i, m) in messages.iter().enumerate() {
            if let Some(content) = m.get("content").and_then(Value::as_array) {
                blocks(content, &format!("messages[{i}].content"), &need)?;
            }
        }
    }
    Ok(())
}

type Need<'a> = dyn Fn(String, ServerTool, &str) -> Result<(), Refusal> + 'a;

/// Content blocks, and those nested in them (a tool_result's content): a
/// stored file or a URL as a source, a file uploaded to the container.
fn blocks(list: &[Value], at: &str, need: &Need) -> Result<(), Refusal> {
    for (j, block) in list.iter().enumerate() {
        let Some(block) = block.as_object() else {
            continue;
        };
        let here = format!("{at}[{j}]");
        if block.get("type").and_then(Value::as_str) == Some("container_upload") {
            need(
                format!("{here}.type \"container_upload\""),
                ServerTool::Files,
                "names a stored file",
            )?;
        }
        if let Some(source) = block.get("source").and_then(Value::as_object) {
            source_of(source, &here, need)?;
        }
        if let Some(inner) = block.get("content").and_then(Value::as_array) {
            blocks(inner, &format!("{here}.content"), need)?;
        }
    }
    Ok(())
}

fn source_of(source: &Map<String, Value>, at: &str, need: &Need) -> Result<(), Refusal> {
    if source.contains_key("file_id") || source.get("type").and_then(Value::as_str) == Some("file") {
        need(format!("{at}.source.file_id"), ServerTool::Files, "names a stored file")?;
    }
    if source.contains_key("url") || source.get("type").and_then(Value::as_str) == Some("url") {
        need(
            format!("{at}.source.url"),
            ServerTool::WebFetch,
            "asks the API to fetch a URL",
        )?;
    }
    Ok(())
}

/// JSON in which no object repeats a key: serde_json keeps the last of
/// two, and an upstream that kept the first would act on a value never
/// judged here (`"tools": [web_fetch], "tools": []`).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if out.contains_key(&k) {
                return Err(de::Error::custom(format!("the key {:?} appears twice", shown(&k))));
            }
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// A name from the sandbox, bounded for a message.
fn shown(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ServerTool::*;

    fn err(body: &str, allowed: &[ServerTool]) -> String {
        judge(body.as_bytes(), allowed).unwrap_err().to_string()
    }

    #[test]
    fn claude_codes_requests_pass() {
        // The fields and tool shapes Claude Code 2.1.197 sent (docs/claude.md).
        let turn = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},
            {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_id":"x","url":"https://x"}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}],
            "system":[{"type":"text","text":"You are Claude Code"}],
            "tools":[{"name":"Bash","description":"d","input_schema":{"type":"object","properties":{"file_id":{"type":"string"}}}}],
            "metadata":{"user_id":"u"},"max_tokens":64000,"thinking":{"type":"adaptive"},
            "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"output_config":{"effort":"high"},"stream":true}"#;
        assert_eq!(judge(turn.as_bytes(), &[]), Ok(()));
        let search = r#"{"model":"m","messages":[],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":8}],
            "tool_choice":{"type":"tool","name":"web_search"},"thinking":{"type":"disabled"}}"#;
        assert_eq!(judge(search.as_bytes(), &[WebSearch]), Ok(()));
        assert!(err(search, &[]).starts_with("tools[0].type \"web_search_20250305\": "));
        let client = r#"{"tools":[{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"e"},{"type":"custom","name":"c","input_schema":{}}]}"#;
        assert_eq!(judge(client.as_bytes(), &[]), Ok(()));
    }

    #[test]
    fn server_side_features_are_refused_by_name() {
        for (body, field, tool) in [
            (
                r#"{"mcp_servers":[{"type":"url","url":"https://exfil.example/sse","name":"x"}]}"#,
                "mcp_servers",
                Mcp,
            ),
            (r#"{"container":"c_1"}"#, "container", CodeExecution),
            (
                r#"{"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}"#,
                "tools[0].type \"web_fetch_20250910\"",
                WebFetch,
            ),
            (
                r#"{"tools":[{"name":"a","input_schema":{}},{"type":"code_execution_20250825","name":"c"}]}"#,
                "tools[1].type \"code_execution_20250825\"",
                CodeExecution,
            ),
            (
                r#"{"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]}"#,
                "tools[0].type \"mcp_toolset\"",
                Mcp,
            ),
            (
                r#"{"tools":[{"type":"tool_search_tool_regex_20251119","name":"t"}]}"#,
                "tools[0].type \"tool_search_tool_regex_20251119\"",
                ToolSearch,
            ),
            (
                r#"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_1"}}]}]}"#,
                "messages[0].content[0].source.file_id",
                Files,
            ),
            (
                r#"{"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"file_1"}]}]}"#,
                "messages[0].content[0].type \"container_upload\"",
                Files,
            ),
            (
                r#"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://exfil.example/?d=secret"}}]}]}"#,
                "messages[0].content[0].source.url",
                WebFetch,
            ),
            (
                r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"url","url":"https://x"}}]}]}]}"#,
                "messages[0].content[0].content[0].source.url",
                WebFetch,
            ),
            (
                r#"{"system":[{"type":"document","source":{"type":"file","file_id":"f"}}]}"#,
                "system[0].source.file_id",
                Files,
            ),
        ] {
            let r = judge(body.as_bytes(), &[]).unwrap_err();
            assert_eq!((r.field.as_str(), r.needs), (field, Some(tool)), "{body}");
            let others: Vec<ServerTool> = ServerTool::ALL.into_iter().filter(|t| *t != tool).collect();
            assert!(judge(body.as_bytes(), &others).is_err(), "{body}");
            assert_eq!(judge(body.as_bytes(), &[tool]), Ok(()), "{body}");
        }
        assert_eq!(
            err(r#"{"mcp_servers":[]}"#, &[WebSearch]),
            "mcp_servers: asks the API to act for the agent (the policy's [claude] server_tools does not list \"mcp\")"
        );
    }

    #[test]
    fn unknown_shapes_are_refused() {
        assert_eq!(
            err(r#"{"model":"m","betas":["files-api-2025-04-14"]}"#, &ServerTool::ALL),
            "betas: not a field of a Messages request the gateway forwards"
        );
        assert!(err(
            r#"{"tools":[{"type":"advisor_20260301","name":"a"}]}"#,
            &ServerTool::ALL
        )
        .starts_with("tools[0].type \"advisor_20260301\": is not a tool type"));
        assert!(err("[]", &[]).starts_with("body: not a JSON object"));
        assert!(err("{\"model\":", &[]).starts_with("body: not JSON"));
        assert!(err("", &[]).starts_with("body: not JSON"));
        // An upstream might keep the first of two keys where serde_json keeps the last.
        assert!(err(
            r#"{"tools":[{"type":"web_fetch_20250910","name":"f"}],"tools":[]}"#,
            &[]
        )
        .starts_with("body: not JSON: the key \"tools\" appears twice"));
        assert!(err(
            r#"{"messages":[{"content":[{"source":{"type":"base64","type":"url"}}]}]}"#,
            &[]
        )
        .contains("twice"));
        // Escapes are read as the upstream reads them.
        assert!(err(r#"{"mcp\u005fservers":[]}"#, &[]).starts_with("mcp_servers: "));
    }
}
