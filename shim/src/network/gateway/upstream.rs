//! Where the gateway forwards to and with what: the caller's upstream URL and
//! credential, read outside the sandbox when the proxy starts, and the TLS
//! configuration for an https upstream. Below the request heads and the
//! serving that use them.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use claude_shim_bundle::policy::values::ServerTool;
use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// `x-api-key`.
    ApiKey(String),
    /// `Authorization: Bearer`; `oauth` adds the beta flag OAuth tokens need.
    Bearer { token: String, oauth: bool },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value.
        match self {
            Self::ApiKey(_) => f.write_str("ApiKey(..)"),
            Self::Bearer { oauth, .. } => write!(f, "Bearer {{ oauth: {oauth} }}"),
        }
    }
}

impl Credential {
    /// The caller's credential from `vars` (name -> value), first set one wins.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let set = |n: &str| get(n).filter(|v| !v.trim().is_empty());
        if let Some(k) = set("ANTHROPIC_API_KEY") {
            return Some(Self::ApiKey(k));
        }
        if let Some(t) = set("ANTHROPIC_AUTH_TOKEN") {
            return Some(Self::Bearer { token: t, oauth: false });
        }
        set("CLAUDE_CODE_OAUTH_TOKEN").map(|t| Self::Bearer { token: t, oauth: true })
    }

    pub fn from_env() -> Option<Self> {
        Self::from_vars(|n| std::env::var(n).ok())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// A path prefix of the base URL (no trailing slash), e.g. `/anthropic`.
    pub base_path: String,
}

impl Upstream {
    /// `http://HOST[:PORT][/PATH]` or `https://...`.
    pub fn parse(url: &str) -> Result<Self> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            bail!("{url:?} is not an http:// or https:// URL");
        };
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if path.contains(['?', '#']) {
            bail!("{url:?}: a base URL has no query or fragment");
        }
        let (host, port) = crate::network::wire::parse_authority(authority, Some(if tls { 443 } else { 80 }))
            .map_err(|e| anyhow!("{url:?}: {e}"))?;
        let host = host.to_string();
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        Ok(Self {
            tls,
            host,
            port,
            base_path: path.trim_end_matches('/').to_owned(),
        })
    }

    pub(super) fn host_header(&self) -> String {
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.tls { 443 } else { 80 } {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

pub struct Gateway {
    pub upstream: Upstream,
    pub(super) credential: Option<Credential>,
    pub(super) tls: Option<Arc<rustls::ClientConfig>>,
    /// The server-side features a request may use (`[claude] server_tools`).
    pub(super) server_tools: Vec<ServerTool>,
}

impl Gateway {
    /// Reads the credential from this process's environment (it was started
    /// by the runtime, outside the sandbox) and the system's CA certificates.
    pub fn new(config: &Config) -> Result<Self> {
        let upstream = Upstream::parse(&config.upstream).context("read the gateway's upstream")?;
        let tls = if upstream.tls { Some(tls_config()?) } else { None };
        Ok(Self {
            upstream,
            credential: Credential::from_env(),
            tls,
            server_tools: config.tools().context("read the gateway's server tools")?,
        })
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        bail!("load the system's CA certificates: none found (install Debian's ca-certificates)");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("set TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The annotation that asks for a gateway; its value is the upstream URL.
pub const ANNOTATION: &str = "run.claude-shim.gateway";
/// The annotation naming the server tools a request may use (comma-separated
/// `[claude] server_tools`); absent, none.
pub const TOOLS_ANNOTATION: &str = "run.claude-shim.gateway.server-tools";
/// What the network plan holds for the gateway, from the annotations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub upstream: String,
    #[serde(default)]
    pub server_tools: Vec<String>,
}

impl Config {
    /// From the two annotations' values, checked.
    pub fn parse(upstream: &str, server_tools: Option<&str>) -> Result<Self> {
        Upstream::parse(upstream).with_context(|| format!("read annotation {ANNOTATION}"))?;
        let cfg = Self {
            upstream: upstream.to_owned(),
            server_tools: server_tools
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        cfg.tools()
            .with_context(|| format!("read annotation {TOOLS_ANNOTATION}"))?;
        Ok(cfg)
    }

    pub fn tools(&self) -> Result<Vec<ServerTool>> {
        self.server_tools
            .iter()
            .map(|t| t.parse().map_err(|e: String| anyhow::anyhow!(e)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_parse() {
        let u = Upstream::parse("https://api.anthropic.com").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.base_path.as_str()),
            (true, "api.anthropic.com", 443, "")
        );
        assert_eq!(u.host_header(), "api.anthropic.com");
        let u = Upstream::parse("http://127.0.0.1:8080/llm/").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.base_path.as_str()),
            (false, "127.0.0.1", 8080, "/llm")
        );
        assert_eq!(u.host_header(), "127.0.0.1:8080");
        let u = Upstream::parse("http://[::1]:9/").unwrap();
        assert_eq!(u.host_header(), "[::1]:9");
        for bad in [
            "ftp://x",
            "api.anthropic.com",
            "https://u@x/",
            "https://x/?a=1",
            "http://x:0",
        ] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn credentials_come_in_order() {
        let vars = |set: &'static [(&'static str, &'static str)]| {
            Credential::from_vars(move |n| set.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()))
        };
        assert_eq!(
            vars(&[("ANTHROPIC_API_KEY", "k"), ("ANTHROPIC_AUTH_TOKEN", "t")]),
            Some(Credential::ApiKey("k".into()))
        );
        assert_eq!(
            vars(&[("ANTHROPIC_API_KEY", " "), ("CLAUDE_CODE_OAUTH_TOKEN", "o")]),
            Some(Credential::Bearer {
                token: "o".into(),
                oauth: true
            })
        );
        assert_eq!(vars(&[]), None);
        assert_eq!(format!("{:?}", Credential::ApiKey("secret".into())), "ApiKey(..)");
    }
}
