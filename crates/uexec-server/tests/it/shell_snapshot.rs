//! `[bash, -lc, cmd]` through `process/start` runs the profile once (a shell snapshot stands
//! in for it afterwards), unless the config turns snapshots off.

use serde_json::json;
use uexec_server::ServerConfig;

use crate::helpers::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_logins_run_the_profile_once_unless_snapshots_are_off() {
    for (shell_snapshot, expected_runs) in [(true, 1), (false, 3)] {
        let home = std::env::temp_dir().join(format!(
            "uexec-serve-snap-{}-{shell_snapshot}",
            std::process::id()
        ));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".bash_profile"),
            "echo run >> \"$HOME/runs\"\nexport PROFILE_VAR=from-profile\n",
        )
        .unwrap();
        let config = ServerConfig {
            shell_snapshot,
            ..ServerConfig::default()
        };
        let server = TestServer::start_with(config, None).await;
        let client = server.session().await;
        let env = json!({"env": {"PATH": "/usr/bin:/bin", "HOME": home.to_str().unwrap()}});
        for i in 0..3 {
            let id = format!("p{i}");
            let argv = ["/bin/bash", "-lc", "echo \"$0 $PROFILE_VAR\""];
            client.start(&id, &argv, env.clone()).await;
            let out = client.wait_output(&id, b"from-profile").await;
            assert_eq!(out, b"/bin/bash from-profile\n");
            client.wait_closed(&id).await;
        }
        let runs = std::fs::read_to_string(home.join("runs")).unwrap();
        assert_eq!(
            runs.lines().count(),
            expected_runs,
            "snapshots {shell_snapshot}"
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
