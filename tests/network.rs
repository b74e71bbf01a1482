//! Network modes end to end: real containers, real pasta, nft and proxy,
//! against a small world the tests build for themselves. Nothing here reaches
//! an address outside it: claude-shim runs inside a test network namespace
//! ("host", 10.123.0.2/24, fd12:3::2/64) whose only link is a veth to a second
//! one ("gateway", 10.123.0.1 and fd12:3::1) that holds every peer:
//!
//!   198.20.123.2 :80 :8080, 2a01:123::2 :80   a "public" server (globally routed addresses, inside the test's namespaces only)
//!   10.123.1.2 :80 :81, 10.123.1.3 :80           private servers
//!   10.123.0.1 :80, 10.123.0.3 :80, fd12:3::1 :80 the gateway and a neighbour on the host's subnet
//!   fd12:9::2 :80                                  a private IPv6 server
//!   169.254.169.254 :80                            a metadata service
//!   198.20.123.2 :22 (ssh.test)                  an SSH server with a git repository (tests/network/ssh.rs)
//!   10.123.0.53 :53/udp                            the resolver (the host's resolv.conf points at it)
//!   host's 0.0.0.0:18080                           a service on the host, loopback included
//!
//! claude-shim sees that world's resolv.conf and hosts through a private
//! mount namespace per invocation. Every namespace (and with it every veth)
//! is deleted when a test ends.

#[path = "network/world.rs"]
mod world;

#[path = "network/container.rs"]
mod container;
#[path = "network/probes.rs"]
mod probes;

#[path = "network/agent.rs"]
mod agent;
#[path = "network/allow.rs"]
mod allow;
#[path = "network/allowlist.rs"]
mod allowlist;
#[path = "network/none.rs"]
mod none;
#[path = "network/public.rs"]
mod public;
#[path = "network/publish.rs"]
mod publish;

#[path = "network/helpers.rs"]
mod helpers;
#[path = "network/parallel.rs"]
mod parallel;
#[path = "network/refusals.rs"]
mod refusals;
#[path = "network/rootless.rs"]
mod rootless;

#[path = "network/sandbox.rs"]
mod sandbox;
#[path = "network/ssh.rs"]
mod ssh;
#[path = "network/verify.rs"]
mod verify;
