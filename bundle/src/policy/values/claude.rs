//! The claude section's values: the model API's server-side features the
//! API gateway of `claude-shim claude` lets a request use.

use serde::Deserialize;

/// A feature with which the model API acts on the network or on stored data
/// for the agent; the gateway refuses a request that uses one not listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub enum ServerTool {
    /// The `web_search_*` tool: the API searches the web for the model's query.
    WebSearch,
    /// The `web_fetch_*` tool and `url` sources: the API fetches a URL.
    WebFetch,
    /// The `code_execution_*` tool and the `container` field: code runs in
    /// the API's container, which has network access.
    CodeExecution,
    /// `mcp_servers` and `mcp_toolset` tools: the API connects to MCP servers.
    Mcp,
    /// `file_id` sources and `container_upload` blocks: the Files API's store.
    Files,
    /// The `tool_search_tool_*` tools.
    ToolSearch,
}

impl ServerTool {
    pub const ALL: [Self; 6] = [
        Self::WebSearch,
        Self::WebFetch,
        Self::CodeExecution,
        Self::Mcp,
        Self::Files,
        Self::ToolSearch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::WebSearch => "web_search",
            Self::WebFetch => "web_fetch",
            Self::CodeExecution => "code_execution",
            Self::Mcp => "mcp",
            Self::Files => "files",
            Self::ToolSearch => "tool_search",
        }
    }
}

impl TryFrom<String> for ServerTool {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::ALL.into_iter().find(|t| t.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|t| t.as_str()).collect();
            format!("unknown server tool {s:?} (known: {})", names.join(", "))
        })
    }
}

impl std::str::FromStr for ServerTool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::try_from(s.to_owned())
    }
}

impl std::fmt::Display for ServerTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
