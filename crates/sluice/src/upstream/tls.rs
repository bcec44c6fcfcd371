//! TLS toward upstreams, their authorization servers and token endpoints.
//!
//! Takes the plain connector; gives one that speaks `https://` URLs over TLS (rustls with the
//! ring provider, TLS 1.2 and 1.3, certificates checked against the system's CA store, or the
//! file and folder named by `SSL_CERT_FILE` / `SSL_CERT_DIR`; the URL's host as SNI and as the
//! name checked; ALPN offering HTTP/2 and HTTP/1.1, so a TLS upstream that speaks HTTP/2 gets it
//! without `http2 = true`) and `http://` URLs as before. Refuses a certificate that does not
//! chain to a trusted CA or does not name the host (the connect error says which), and nothing
//! else: with no CA found at all, every `https://` URL is refused that way and a warning says
//! why at start.

use std::sync::Arc;

use hyper_rustls::{ConfigBuilderExt, HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;

/// The connector of Sluice's upstream client.
pub type Connector = HttpsConnector<HttpConnector>;

/// `plain` (which must not refuse `https://` itself) wrapped in TLS for `https://` URLs.
pub fn connector(mut plain: HttpConnector) -> Connector {
    plain.enforce_http(false);
    HttpsConnectorBuilder::new()
        .with_tls_config(config())
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(plain)
}

fn config() -> rustls::ClientConfig {
    // ring rather than aws-lc-rs: no C toolchain (CMake) in the build. Its cost: no
    // post-quantum key exchange, which is why rustls marks it deprecated.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions");
    match builder.clone().with_native_roots() {
        Ok(b) => b.with_no_client_auth(),
        Err(e) => {
            tracing::warn!(error = %e, "no CA certificate found (system store, SSL_CERT_FILE, SSL_CERT_DIR): https:// upstreams will be refused");
            builder
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        }
    }
}
