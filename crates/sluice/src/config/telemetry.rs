//! `[telemetry]`: OpenTelemetry traces exported over OTLP/HTTP (protobuf).
//!
//! Takes the raw table; gives [`Telemetry`] (`None` when the table is absent: tracing off, at no
//! cost). Refuses a table without `otlp_endpoint` (a configured exporter with nowhere to send
//! is a mistake, not "off"), an endpoint that is not an `http://` URL with a host (the exporter
//! has no TLS here: put a collector next to Sluice), an empty `service_name` and a
//! `sampling_ratio` outside 0..=1. The endpoint is printed with its credentials redacted.

use serde::Serialize;

use super::raw::RawTelemetry;
use super::Invalid;

/// Where and how traces are exported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Telemetry {
    /// The collector's OTLP/HTTP traces URL (`/v1/traces` appended to a URL without a path);
    /// printed through the one redaction of `redact.rs`.
    pub otlp_endpoint: String,
    /// `service.name` of the spans (default `sluice`).
    pub service_name: String,
    /// The share of new traces sampled, 0 to 1 (default 1); a request whose caller's trace is
    /// sampled (or not) follows its caller.
    pub sampling_ratio: f64,
}

/// The `[telemetry]` table, checked.
pub(super) fn telemetry(raw: Option<RawTelemetry>) -> Result<Option<Telemetry>, Invalid> {
    let Some(raw) = raw else { return Ok(None) };
    let endpoint = raw.otlp_endpoint.unwrap_or_default();
    if endpoint.trim().is_empty() {
        return Err(Invalid(
            "[telemetry] needs otlp_endpoint (the collector's OTLP/HTTP URL, e.g. \"http://127.0.0.1:4318\"); remove the table to turn tracing off".into(),
        ));
    }
    let uri: http::Uri = endpoint.parse().map_err(|_| {
        Invalid(format!(
            "telemetry.otlp_endpoint {:?} is not a URL",
            super::redact_url(&endpoint)
        ))
    })?;
    if uri.scheme_str() != Some("http") || uri.host().is_none_or(str::is_empty) {
        return Err(Invalid(format!(
            "telemetry.otlp_endpoint {:?} must be an http:// URL with a host (OTLP/HTTP without TLS: run a collector beside Sluice for https)",
            super::redact_url(&endpoint)
        )));
    }
    let otlp_endpoint = if matches!(uri.path(), "" | "/") && uri.query().is_none() {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    } else {
        endpoint
    };
    let service_name = raw.service_name.unwrap_or_else(|| "sluice".to_owned());
    if service_name.trim().is_empty() {
        return Err(Invalid(
            "telemetry.service_name must not be empty (default \"sluice\")".into(),
        ));
    }
    let sampling_ratio = raw.sampling_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sampling_ratio) {
        return Err(Invalid(format!("telemetry.sampling_ratio = {sampling_ratio} must be between 0 and 1 (1: every new trace)")));
    }
    Ok(Some(Telemetry {
        otlp_endpoint,
        service_name,
        sampling_ratio,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(endpoint: Option<&str>) -> RawTelemetry {
        RawTelemetry {
            otlp_endpoint: endpoint.map(str::to_owned),
            service_name: None,
            sampling_ratio: None,
        }
    }

    #[test]
    fn absent_is_off_and_a_base_url_gets_the_traces_path() {
        assert!(telemetry(None).unwrap().is_none());
        let t = telemetry(Some(raw(Some("http://127.0.0.1:4318"))))
            .unwrap()
            .unwrap();
        assert_eq!(t.otlp_endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!((t.service_name.as_str(), t.sampling_ratio), ("sluice", 1.0));
        let t = telemetry(Some(raw(Some("http://collector:4318/custom/traces"))))
            .unwrap()
            .unwrap();
        assert_eq!(t.otlp_endpoint, "http://collector:4318/custom/traces");
    }

    #[test]
    fn an_exporter_with_nowhere_to_send_or_a_bad_value_is_refused() {
        for bad in [
            None,
            Some(""),
            Some("https://collector:4318"),
            Some("collector:4318"),
            Some("http:///v1/traces"),
        ] {
            let e = telemetry(Some(raw(bad))).unwrap_err().0;
            assert!(e.contains("otlp_endpoint"), "{bad:?}: {e}");
        }
        let e = telemetry(Some(RawTelemetry {
            sampling_ratio: Some(1.5),
            ..raw(Some("http://c:4318"))
        }))
        .unwrap_err()
        .0;
        assert!(e.contains("sampling_ratio"), "{e}");
        let e = telemetry(Some(RawTelemetry {
            service_name: Some(" ".into()),
            ..raw(Some("http://c:4318"))
        }))
        .unwrap_err()
        .0;
        assert!(e.contains("service_name"), "{e}");
    }

    #[test]
    fn the_endpoint_prints_without_its_credentials() {
        let text = "[telemetry]\notlp_endpoint = \"http://user:s3cret@collector:4318/v1/traces?api_key=k3y\"\n";
        let c = crate::config::Config::from_toml(text, "x", &Default::default()).unwrap();
        let printed = c.redacted();
        assert!(
            !printed.contains("s3cret") && !printed.contains("k3y"),
            "{printed}"
        );
        assert!(
            printed.contains(
                "otlp_endpoint = \"http://redacted@collector:4318/v1/traces?api_key=redacted\""
            ),
            "{printed}"
        );
    }
}
