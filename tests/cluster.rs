//! Replicas that behave as one (issue 13), against the real parts: `redis-server` and HAProxy
//! from Debian's packages, three `sluice serve` processes, the real `mcp==1.30.0` upstream and
//! client. See tests/replicas/mod.rs.

mod support;

mod replicas;
