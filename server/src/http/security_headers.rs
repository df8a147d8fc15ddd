//! Headers every dashboard response carries: whatever answers a path under
//! `/ui` (the sign-in routes, the static page, errors and 404s alike) and
//! the `/` redirect. The admin API's replies (`/v1/admin/*`, JSON, CSV, the
//! event stream and errors) hold holder names and reasons, so they carry
//! `nosniff` and `Cache-Control: no-store` too. They are added in
//! [`super::routes`] by path, after every route and rejection, so a route
//! added under `/ui/` or `/v1/admin/` later gets them without doing anything.

use warp::http::HeaderValue;
use warp::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use warp::reply::Response;

/// Scripts, styles, fetches and images only from the server itself (images
/// also as `data:`), no inline script or style, no `eval`, never framed, no
/// `<base>`, forms post only back to the server.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
     base-uri 'none'; form-action 'self'";

/// Whether `path` is the dashboard's: `/`, `/ui` and everything under `/ui/`.
pub fn is_ui_path(path: &str) -> bool {
    path == "/" || path == "/ui" || path.starts_with("/ui/")
}

/// Whether `path` is the admin API's: `/v1/admin` and everything under it.
pub fn is_admin_path(path: &str) -> bool {
    path == "/v1/admin" || path.starts_with("/v1/admin/")
}

/// Add the dashboard's security headers to `resp` if `path` is the
/// dashboard's, and the admin API's if it is the admin API's (replacing any
/// a route set).
pub fn apply(path: &str, mut resp: Response) -> Response {
    if is_admin_path(path) {
        let headers = resp.headers_mut();
        headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        // Holder names and reasons must not stay in a browser's or a proxy's cache.
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if is_ui_path(path) {
        let headers = resp.headers_mut();
        headers.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
        );
        headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ui_paths() {
        for p in ["/", "/ui", "/ui/", "/ui/app.js", "/ui/login"] {
            assert!(is_ui_path(p), "{p}");
        }
        for p in ["/uix", "/v1/admin/seats", "/healthz", "/metrics"] {
            assert!(!is_ui_path(p), "{p}");
        }
        for p in ["/v1/admin", "/v1/admin/seats", "/v1/admin/events/stream"] {
            assert!(is_admin_path(p), "{p}");
        }
        for p in ["/v1/adminx", "/v1/licenses/a/seats", "/ui/"] {
            assert!(!is_admin_path(p), "{p}");
        }
    }

    #[test]
    fn the_policy_allows_nothing_inline() {
        assert!(!CONTENT_SECURITY_POLICY_VALUE.contains("unsafe"));
        assert!(CONTENT_SECURITY_POLICY_VALUE.contains("frame-ancestors 'none'"));
    }
}
