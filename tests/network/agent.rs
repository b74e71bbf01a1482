//! The whole agent in the network world: `claude-shim claude --publish`
//! runs the real `claude` CLI against the mock API (which listens in the
//! world's host namespace, where claude-shim runs). The agent's first Bash
//! call is refused wild.test; the user, on the host, reads the refusal with
//! `denials`, admits the host with `allow` while the agent runs, and the
//! agent's next call reaches it, in the same session. Its third call serves
//! the project on port 8000, which the user reaches from the host through
//! the published port.

use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use claude_shim_e2e::claude_world::{text, World as ClaudeWorld};
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

use crate::world::{output_of as world_output_of, World};

/// The mock API, listening in namespace `ns` (its threads are born there).
fn mock_in(ns: &str, commands: &[&str]) -> MockApi {
    let path = World::ns_path(ns);
    let commands: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
    std::thread::spawn(move || {
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: setns on this thread only, which ends after the listener is made.
        let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns into {}", path.display());
        let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
        MockApi::start(&commands)
    })
    .join()
    .unwrap()
}

/// `cmd` in the world, with nothing of the test's environment but what
/// `cmd` sets (the claude world's clean environment).
fn in_world(world: &World, cmd: Command) -> Command {
    let envs: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> = cmd
        .get_envs()
        .map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned())))
        .collect();
    let cwd = cmd.get_current_dir().map(|d| d.to_owned());
    let mut c = world.wrap(cmd);
    c.env_clear();
    for (k, v) in envs.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))) {
        c.env(k, v);
    }
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    c
}

#[test]
fn a_host_allowed_while_the_agent_runs_is_reached_in_the_same_session() {
    let world = World::new();
    let w = ClaudeWorld::new(None);
    // The second call waits (at most 60 s) for the word from the host.
    let first = "curl -s -o /dev/null -w 'first: %{http_code}\\n' --max-time 5 http://wild.test/";
    let second = "n=0; while [ ! -e allowed-from-the-host ] && [ $n -lt 600 ]; do n=$((n+1)); sleep 0.1; done; \
                  curl -s -w ' second: %{http_code}\\n' --max-time 5 http://wild.test/";
    let serve = "python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & \
                 n=0; while [ ! -e fetched-from-the-host ] && [ $n -lt 600 ]; do n=$((n+1)); sleep 0.1; done; \
                 kill $!; echo served";
    let mock = mock_in(&world.host, &[first, second, serve]);
    std::fs::write(w.proj.join("hello.txt"), "hello from the agent's project\n").unwrap();
    // A port nobody uses in the world's fresh namespace (it serves only 18080).
    let host_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let publish = format!("{host_port}:8000");
    let shim = |args: &[&str]| {
        let mut c = w.command(&shim_path(), &mock);
        c.arg("--root").arg(&w.root).args(args);
        c
    };
    let mut agent = shim(&[
        "claude",
        "--publish",
        &publish,
        "--",
        "-p",
        "run the test command",
        "--allowedTools",
        "Bash",
    ]);
    agent.args(["--output-format", "stream-json", "--verbose"]);
    let out_path = w.dir.path().join("agent.out");
    let err_path = w.dir.path().join("agent.err");
    let mut agent = in_world(&world, agent);
    agent
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut agent = Background::shim(agent.spawn().unwrap(), &shim_path(), &w.root);

    // On the host, in the project: the refusal, with the command that allows it.
    let start = Instant::now();
    let live = loop {
        let o = world_output_of(in_world(&world, shim(&["denials"])), w.dir.path());
        let s = format!("{}{}", text(&o.stdout), text(&o.stderr));
        if s.contains("refused egress: wild.test:80") {
            break s;
        }
        if let Some(status) = agent.try_wait() {
            panic!(
                "the agent ended ({status}) before its refusal: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no refusal after 120 s: {s}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("$ claude-shim denials   # on the host, while the agent runs\n{live}");
    assert!(live.contains("to allow it: claude-shim --root "), "{live}");
    let allowed = world_output_of(in_world(&world, shim(&["allow", "wild.test"])), w.dir.path());
    let said = format!("{}{}", text(&allowed.stdout), text(&allowed.stderr));
    eprintln!("$ claude-shim allow wild.test\n{said}");
    assert!(allowed.status.success(), "{said}");
    assert!(said.contains("wild.test is allowed"), "{said}");
    std::fs::write(w.proj.join("allowed-from-the-host"), "").unwrap();

    // The agent's server, from the host, through the published port.
    let url = format!("http://127.0.0.1:{host_port}/hello.txt");
    let start = Instant::now();
    let got = loop {
        let mut curl = Command::new("curl");
        curl.args(["-s", "--max-time", "5", &url]);
        let o = world_output_of(world.wrap(curl), w.dir.path());
        if o.status.success() && !o.stdout.is_empty() {
            break text(&o.stdout);
        }
        if let Some(status) = agent.try_wait() {
            panic!(
                "the agent ended ({status}) before it served: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        assert!(start.elapsed() < Duration::from_secs(90), "nothing at {url} after 90 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("$ curl {url}   # on the host\n{got}");
    assert_eq!(got, "hello from the agent's project\n");
    std::fs::write(w.proj.join("fetched-from-the-host"), "").unwrap();

    let status = agent.wait(Duration::from_secs(150));
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(status.success(), "claude: {err}");
    let results = mock.tool_results();
    eprintln!("the agent's Bash results, as the API received them: {results:?}");
    assert_eq!(results.len(), 3, "{results:?}\n{err}");
    assert!(results[0].contains("first: 403"), "refused at first: {results:?}");
    assert!(
        results[1].contains("hello-pub\n second: 200"),
        "reached after allow, in the same session: {results:?}"
    );
    assert!(results[2].contains("served"), "{results:?}");
    // The session is one: one agent, one sandbox, no restart.
    assert!(w.left_in_state().is_empty(), "{:?}", w.left_in_state());
}
