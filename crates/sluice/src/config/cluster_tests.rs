//! `[cluster]`'s checks: what each mistake is refused with, what it sets, and that the printed
//! config hides the Redis password.

use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "sluice.toml", &Overrides::default())
}

const KEYS: &str = "[state]\nkeys = [\"1:KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=\"]\n";

fn with(cluster: &str) -> Result<Config, ConfigError> {
    load(&format!("{KEYS}\n[cluster]\n{cluster}\n"))
}

#[test]
fn a_cluster_is_read_with_its_defaults_and_names_the_replica_in_sealed_state() {
    let c = with(
        "redis_url = \"redis://:pw@10.0.0.5:6379/0\"\nid = \"sluice-1\"\nlisten = \"127.0.0.1:0\"",
    )
    .unwrap();
    let cl = c.cluster.clone().unwrap();
    assert_eq!(
        (
            cl.id.as_str(),
            cl.on_redis_error,
            cl.redis_timeout.as_millis(),
            cl.advertise_url
        ),
        ("sluice-1", OnRedisError::Closed, 500, None)
    );
    assert_eq!(
        c.state.replica, "sluice-1",
        "sealed state names the cluster's id"
    );
    let printed = c.redacted();
    assert!(
        !printed.contains("pw@") && printed.contains("redis_url"),
        "{printed}"
    );
    assert!(
        printed.contains("[cluster]") && printed.contains("id = \"sluice-1\""),
        "{printed}"
    );
    assert!(load("").unwrap().cluster.is_none(), "no table: one process");
}

#[test]
fn every_cluster_mistake_is_refused_saying_what_to_do() {
    let cases = [
        ("id = \"a\"\nlisten = \"127.0.0.1:0\"", "needs redis_url"),
        ("redis_url = \"http://x\"\nid = \"a\"\nlisten = \"127.0.0.1:0\"", "must be a redis:// URL"),
        ("redis_url = \"redis://x:1\"\nlisten = \"127.0.0.1:0\"", "every replica needs its own id"),
        ("redis_url = \"redis://x:1\"\nid = \"a b\"\nlisten = \"127.0.0.1:0\"", "every replica needs its own id"),
        ("redis_url = \"redis://x:1\"\nid = \"a\"", "needs listen"),
        ("redis_url = \"redis://x:1\"\nid = \"a\"\nlisten = \"0.0.0.0:9100\"", "set cluster.advertise_url"),
        ("redis_url = \"redis://x:1\"\nid = \"a\"\nlisten = \"0.0.0.0:9100\"\nadvertise_url = \"https://a\"", "must be http://host:port"),
        (
            "redis_url = \"redis://x:1\"\nid = \"a\"\nlisten = \"127.0.0.1:0\"\non_redis_error = \"open\"",
            "expected \"closed\" or \"local\"",
        ),
        (
            "redis_url = \"redis://x:1\"\nid = \"${SLUICE_TEST_UNSET_ID}\"\nlisten = \"127.0.0.1:0\"",
            "variable, SLUICE_TEST_UNSET_ID, that is not set",
        ),
        ("redis_url = \"redis://x:1\"\nid = \"a\"\nlisten = \"127.0.0.1:0\"\nredis_timeout_ms = 0", "expected 1 to 60000"),
    ];
    for (text, says) in cases {
        let err = with(text).unwrap_err().0;
        assert!(err.contains(says), "{text:?}: {err}");
    }
    // Replicas must share configured keys: a random key per process is refused.
    let err =
        load("[cluster]\nredis_url = \"redis://x:1\"\nid = \"a\"\nlisten = \"127.0.0.1:0\"\n")
            .unwrap_err()
            .0;
    assert!(err.contains("needs shared state keys"), "{err}");
    let err = load(&format!("{KEYS}replica = \"b\"\n[cluster]\nredis_url = \"redis://x:1\"\nid = \"a\"\nlisten = \"127.0.0.1:0\"\n"))
        .unwrap_err()
        .0;
    assert!(err.contains("state.replica and cluster.id differ"), "{err}");
}

#[test]
fn the_internal_listeners_share_per_source_is_a_quarter_off_loopback_and_bounded() {
    let base = "redis_url = \"redis://10.0.0.5:6379/0\"\nid = \"r1\"";
    let share = |extra: &str| {
        with(&format!("{base}\n{extra}")).map(|c| c.cluster.unwrap().max_connections_per_source)
    };
    assert_eq!(
        share("listen = \"127.0.0.1:9100\"").unwrap(),
        10_000,
        "loopback: one source"
    );
    assert_eq!(
        share("listen = \"10.0.0.9:9100\"").unwrap(),
        2_500,
        "a quarter of limits.max_connections"
    );
    assert_eq!(
        share("listen = \"10.0.0.9:9100\"\nmax_connections_per_source = 3").unwrap(),
        3
    );
    for bad in ["0", "10001"] {
        let e = share(&format!(
            "listen = \"10.0.0.9:9100\"\nmax_connections_per_source = {bad}"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("cluster.max_connections_per_source"), "{e}");
    }
}
