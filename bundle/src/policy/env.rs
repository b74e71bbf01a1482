//! The fixed secret rule of the environment section: names that never reach
//! the sandbox unless `environment.pass_secrets` lists them by exact name.
//! The rule is not configurable, so a policy cannot loosen it by omission.

/// Glob patterns (`*` = any run of characters), matched case-insensitively.
/// Tokens and keys by naming convention, cloud credentials, and variables
/// that point at a credential agent or a container engine's socket.
pub const SECRET_PATTERNS: &[&str] = &[
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITLAB_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "TOKEN",
    "*_TOKEN",
    "*_TOKEN_*",
    "*_API_KEY",
    "*_APIKEY",
    "*_ACCESS_KEY",
    "*_ACCESS_KEY_*",
    "*_PRIVATE_KEY",
    "*_SECRET",
    "*_SECRET_*",
    "*_SECRETS",
    "*_PASSWORD",
    "*_PASSWD",
    "*_CREDENTIALS",
    "*_AUTH",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DOCKER_HOST",
    "DOCKER_AUTH_CONFIG",
    "CONTAINER_HOST",
    "KUBECONFIG",
    "VAULT_*",
    "NPM_CONFIG__AUTH*",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// Set by the allowlist network mode (the contract with the network helper).
pub(crate) const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| glob(rest, &name[i..])),
        Some((c, rest)) => name.first().is_some_and(|n| n == c) && glob(rest, &name[1..]),
    }
}

/// True when the secret rule drops `name`.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_PATTERNS.iter().any(|p| glob(p.as_bytes(), upper.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised() {
        for n in [
            "GH_TOKEN",
            "gh_token",
            "NPM_TOKEN",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "STRIPE_SECRET_KEY",
            "DB_PASSWORD",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "SSH_AUTH_SOCK",
            "GPG_AGENT_INFO",
            "DOCKER_HOST",
            "CLAUDE_CODE_MESSAGING_TOKEN",
            "ANTHROPIC_AUTH_TOKEN",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "TERM",
            "LANG",
            "LC_ALL",
            "EDITOR",
            "TOKENIZERS_PARALLELISM",
            "SHELL",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }
}
