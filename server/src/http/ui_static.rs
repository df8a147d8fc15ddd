//! The web dashboard's files (`server/ui/`), compiled into the binary so
//! `leaseholdd` serves its own page: no CDN, no build step, nothing to
//! install next to the binary. Their routes are `filters::dashboard_page`
//! (handlers `ui_page` and `ui_file`): `GET /ui` redirects to `/ui/`,
//! `GET /ui/` is `index.html`, `GET /ui/<file>` one of [`FILES`].
//!
//! An unknown name is a *rejection*, not a 404 reply, so the sign-in routes
//! under `/ui/` (`/ui/session`, `/ui/login`, ...) still get their turn and an
//! unmatched path ends as the API's JSON 404. Every file is sent with
//! `Cache-Control: no-cache`: the browser revalidates, so a new binary's
//! page is never mixed with an old cached module.

use warp::http::{HeaderValue, header};
use warp::reply::Response;

/// `(name, content type, bytes)` of every file the page loads.
pub const FILES: &[(&str, &str, &[u8])] = &[
    ("index.html", HTML, include_bytes!("../../ui/index.html")),
    ("app.css", CSS, include_bytes!("../../ui/app.css")),
    ("app.js", JS, include_bytes!("../../ui/app.js")),
    ("api.js", JS, include_bytes!("../../ui/api.js")),
    ("dom.js", JS, include_bytes!("../../ui/dom.js")),
    ("format.js", JS, include_bytes!("../../ui/format.js")),
    ("url_state.js", JS, include_bytes!("../../ui/url_state.js")),
    ("pools.js", JS, include_bytes!("../../ui/pools.js")),
    ("holders.js", JS, include_bytes!("../../ui/holders.js")),
    ("events.js", JS, include_bytes!("../../ui/events.js")),
    ("revoke.js", JS, include_bytes!("../../ui/revoke.js")),
    ("history.js", JS, include_bytes!("../../ui/history.js")),
    ("chart.js", JS, include_bytes!("../../ui/chart.js")),
    ("what_if.js", JS, include_bytes!("../../ui/what_if.js")),
    ("webhooks.js", JS, include_bytes!("../../ui/webhooks.js")),
    ("keys.js", JS, include_bytes!("../../ui/keys.js")),
    ("login.js", JS, include_bytes!("../../ui/login.js")),
    ("theme.js", JS, include_bytes!("../../ui/theme.js")),
    ("favicon.svg", SVG, include_bytes!("../../ui/favicon.svg")),
];

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
// ES modules must be served with a JavaScript MIME type or the browser
// refuses to run them.
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The embedded file `name` as a response, if there is one.
pub(super) fn file(name: &str) -> Option<Response> {
    let &(_, content_type, body) = FILES.iter().find(|(n, _, _)| *n == name)?;
    let mut resp = Response::new(body.into());
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::filters::dashboard_page as routes;

    #[tokio::test]
    async fn serves_each_file_with_its_type_and_no_cache() {
        let routes = routes();
        for (name, content_type, body) in FILES {
            let resp = warp::test::request()
                .path(&format!("/ui/{name}"))
                .reply(&routes)
                .await;
            assert_eq!(resp.status(), 200, "{name}");
            assert_eq!(resp.headers()["content-type"], *content_type, "{name}");
            assert_eq!(resp.headers()["cache-control"], "no-cache", "{name}");
            assert_eq!(resp.body().as_ref(), *body, "{name}");
        }
        let index = warp::test::request().path("/ui/").reply(&routes).await;
        assert_eq!(index.status(), 200);
        assert_eq!(index.headers()["content-type"], HTML);
        let bare = warp::test::request().path("/ui").reply(&routes).await;
        assert_eq!(bare.status(), 301);
        assert_eq!(bare.headers()["location"], "/ui/");
    }

    #[tokio::test]
    async fn unknown_names_are_rejected_not_answered() {
        let routes = routes();
        for path in ["/ui/nope.js", "/ui/session", "/ui/../Cargo.toml", "/ui/a/b"] {
            let matched = warp::test::request().path(path).matches(&routes).await;
            assert!(!matched, "{path} must fall through to the other routes");
        }
        let post = warp::test::request()
            .method("POST")
            .path("/ui/app.js")
            .matches(&routes)
            .await;
        assert!(!post, "only GET serves files");
    }

    #[test]
    fn the_page_weighs_at_most_150_kb() {
        let total: usize = FILES.iter().map(|(_, _, b)| b.len()).sum();
        assert!(total <= 150 * 1024, "the page weighs {total} bytes");
    }
}
