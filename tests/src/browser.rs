//! A headless Chromium for the dashboard's browser tests, driven through
//! Debian's `chromedriver` with the `fantoccini` WebDriver client.
//!
//! Not part of the library (fantoccini is a dev-dependency): test files
//! include it with `#[path = "../src/browser.rs"] mod browser;`.
//!
//! Each [`Browser`] is one chromedriver on a free loopback port with one
//! Chromium in a fresh profile. Browsers are taken one at a time per test
//! binary (a process-wide lock): two Chromiums on two cores would make the
//! timing assertions measure each other. Every document gets a small probe
//! (`window.__probe`) before the page's own scripts run, through the
//! DevTools protocol, so CSP violations and uncaught errors are collected
//! even if they happen during load; the browser's console log
//! (`goog:loggingPrefs`) is read as well.

#![allow(dead_code)] // each test file uses part of it

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// An async lock: the turn is held across awaits for the browser's life,
/// by tests that each run their own runtime.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const HOW_TO_INSTALL: &str = "install Debian's chromium and chromium-driver \
     (apt-get install chromium chromium-driver), or point LEASEHOLD_CHROMIUM and \
     LEASEHOLD_CHROMEDRIVER at them";

/// Runs in every document before its scripts: collects what the tests
/// assert never happens, and times the page's countdown tick (a timer
/// callback named `countdownTick`).
const PROBE: &str = r#"
(() => {
  const p = window.__probe = { csp: [], errors: [], ticks: [], fetches: [] };
  // Every request the page makes, as "METHOD path", logged when it is
  // made: a test asserts a request was never made without waiting.
  const fetch0 = window.fetch;
  window.fetch = function (input, init) {
    const url = new URL(typeof input === 'string' ? input : input.url, location.href);
    p.fetches.push(`${(init && init.method) || 'GET'} ${url.pathname}`);
    return fetch0.apply(this, arguments);
  };
  addEventListener('securitypolicyviolation', (e) =>
    p.csp.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber}`));
  addEventListener('error', (e) => p.errors.push(`${e.message} at ${e.filename}:${e.lineno}`));
  addEventListener('unhandledrejection', (e) => p.errors.push(`unhandled rejection: ${e.reason}`));
  const setTimeout0 = window.setTimeout;
  window.setTimeout = function (fn, ms, ...args) {
    if (typeof fn === 'function' && fn.name === 'countdownTick') {
      const tick = fn;
      fn = function () {
        const t0 = performance.now();
        try { return tick.apply(this, arguments); } finally { p.ticks.push(performance.now() - t0); }
      };
    }
    return setTimeout0.call(this, fn, ms, ...args);
  };
})();
"#;

fn tool_path(env: &str, default: &str) -> PathBuf {
    std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// A WebDriver command fantoccini has no method for: `POST path` (relative
/// to the session) with a JSON body.
#[derive(Debug)]
struct SessionPost {
    path: &'static str,
    body: Value,
}

impl WebDriverCompatibleCommand for SessionPost {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        let id = session_id.unwrap_or_default();
        base_url.join(&format!("session/{id}/{}", self.path))
    }

    fn method_and_body(&self, _url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.body.to_string()))
    }
}

pub struct Browser {
    pub client: Client,
    driver: Child,
    profile: tempfile::TempDir,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    /// Start chromedriver and a headless Chromium. Fails the test, saying
    /// how to install them, if either is missing.
    pub async fn start() -> Browser {
        let turn = ONE_AT_A_TIME.lock().await;
        let chromium = tool_path("LEASEHOLD_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = tool_path("LEASEHOLD_CHROMEDRIVER", "/usr/bin/chromedriver");
        leasehold_tests::require_tool(
            Command::new(&chromedriver).arg("--version"),
            "chromedriver",
            HOW_TO_INSTALL,
        );
        assert!(
            chromium.exists(),
            "needs Chromium at {}: {HOW_TO_INSTALL} (bash .ci/run does)",
            chromium.display()
        );
        let profile = tempfile::tempdir().expect("profile dir");
        let (driver, port) = start_driver(&chromedriver);
        let url = format!("http://127.0.0.1:{port}");
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900", "--lang=en-US",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let caps = match caps {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("chromedriver would not start Chromium: {e}"));
        let browser = Browser {
            client,
            driver,
            profile,
            _turn: turn,
        };
        browser
            .cdp(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": PROBE }),
            )
            .await;
        browser
    }

    /// A DevTools protocol command through chromedriver.
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.client
            .issue_cmd(SessionPost {
                path: "goog/cdp/execute",
                body: json!({ "cmd": cmd, "params": params }),
            })
            .await
            .unwrap_or_else(|e| panic!("CDP {cmd}: {e}"))
    }

    /// The browser's console log since the last call (chromedriver's
    /// `se/log`; each entry has `level`, `message`, `source`).
    pub async fn console_log(&self) -> Vec<Value> {
        let v = self
            .client
            .issue_cmd(SessionPost {
                path: "se/log",
                body: json!({ "type": "browser" }),
            })
            .await
            .expect("browser log");
        v.as_array().cloned().unwrap_or_default()
    }

    /// Fail unless the page had no CSP violation, no uncaught error and no
    /// console error. Failed requests the test caused on purpose (a wrong
    /// token's 401, a revoke refused) are the network's, not the page's,
    /// and are not counted.
    /// The requests with `method` the page has made so far ("METHOD
    /// path"), in order.
    pub async fn requests_made(&self, method: &str) -> Vec<String> {
        let all: Vec<String> =
            serde_json::from_value(self.eval("return window.__probe.fetches").await)
                .expect("the probe's request log");
        all.into_iter()
            .filter(|r| r.starts_with(&format!("{method} ")))
            .collect()
    }

    pub async fn assert_clean(&self) {
        let probe = self.eval("return window.__probe || null").await;
        let mut problems = Vec::new();
        if let Some(p) = probe.as_object() {
            for key in ["csp", "errors"] {
                for v in p[key].as_array().into_iter().flatten() {
                    problems.push(format!("{key}: {v}"));
                }
            }
        } else {
            problems.push("the probe did not run in this document".into());
        }
        for entry in self.console_log().await {
            let level = entry["level"].as_str().unwrap_or("");
            let source = entry["source"].as_str().unwrap_or("");
            let message = entry["message"].as_str().unwrap_or("");
            let network = source == "network" || message.contains("Failed to load resource");
            if (level == "SEVERE" && !network) || message.contains("Content Security Policy") {
                problems.push(format!("console {level} {source}: {message}"));
            }
        }
        assert!(
            problems.is_empty(),
            "the page logged problems:\n{}",
            problems.join("\n")
        );
    }

    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("goto {url}: {e}"));
    }

    /// Run `script` (a function body; `arguments` are `args`) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Run an async script: its last argument is the callback to call with
    /// the result.
    pub async fn eval_async(&self, script: &str) -> Value {
        self.client
            .execute_async(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("async script failed: {e}\n{script}"))
    }

    /// The first element matching `css`, waiting up to `timeout`.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Element {
        self.wait_until(timeout, &format!("an element {css}"), || async {
            self.client.find(Locator::Css(css)).await.ok()
        })
        .await
    }

    /// Poll `check` every 25 ms until it returns `Some`.
    pub async fn wait_until<T, F, Fut>(&self, timeout: Duration, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = check().await {
                return v;
            }
            if Instant::now() > deadline {
                let shot = self.save_failure_screenshot().await;
                panic!("timed out after {timeout:?} waiting for {what} (screenshot: {shot})");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The text of the first element matching `css` ("" if none).
    pub async fn text(&self, css: &str) -> String {
        match self.client.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .map(|v| v.len())
            .unwrap_or(0)
    }

    /// Wait until the text of `css` satisfies `pred`; returns that text.
    pub async fn wait_text(
        &self,
        css: &str,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        self.wait_until(timeout, what, || async {
            let t = self.text(css).await;
            pred(&t).then_some(t)
        })
        .await
    }

    /// Open the dashboard of `base` and sign in with `token`; returns once
    /// the role is shown.
    pub async fn sign_in(&self, base: &str, token: &str) {
        self.goto(&format!("{base}/ui/")).await;
        let input = self
            .wait_for("input[name=token]", Duration::from_secs(10))
            .await;
        self.wait_until(Duration::from_secs(10), "the sign-in form", || async {
            input.is_displayed().await.ok().filter(|d| *d)
        })
        .await;
        input.send_keys(token).await.expect("type the token");
        self.click("#login-form button[type=submit]").await;
        self.wait_text("[data-role]", Duration::from_secs(10), "the role", |t| {
            t == "admin" || t == "viewer"
        })
        .await;
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} to click: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Keys to whatever has the focus (`fantoccini::key::Key` chars work).
    pub async fn keys(&self, text: &str) {
        self.client
            .active_element()
            .await
            .expect("an active element")
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("send keys {text:?}: {e}"));
    }

    pub async fn screenshot(&self) -> Result<Vec<u8>, CmdError> {
        self.client.screenshot().await
    }

    /// On a timeout: a PNG of the page in the temp dir, for the failure message.
    async fn save_failure_screenshot(&self) -> String {
        match self.client.screenshot().await {
            Ok(png) => {
                let path = std::env::temp_dir().join(format!(
                    "leasehold-dashboard-failure-{}.png",
                    std::process::id()
                ));
                match std::fs::write(&path, png) {
                    Ok(()) => path.display().to_string(),
                    Err(e) => format!("not saved: {e}"),
                }
            }
            Err(e) => format!("none: {e}"),
        }
    }

    /// End the WebDriver session (Chromium exits), then chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        self.kill();
    }

    fn kill(&mut self) {
        // Negative pid: the whole process group, Chromium included.
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg("--")
            .arg(format!("-{}", self.driver.id()))
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.wait();
    }

    /// Where the temp profile lives (for a test that checks storage).
    pub fn profile_dir(&self) -> PathBuf {
        self.profile.path().to_path_buf()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// chromedriver on a free port, listening. The port is free when chosen
/// but another process (the other CI lane) may take it before chromedriver
/// binds it: then chromedriver exits, and it is started again on another.
fn start_driver(chromedriver: &std::path::Path) -> (Child, u16) {
    for _ in 0..5 {
        let port = free_port();
        // Its own process group, so Drop can kill chromedriver and the
        // Chromium it started together, even after a failed assertion.
        let mut driver = {
            use std::os::unix::process::CommandExt;
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .arg("--allowed-ips=127.0.0.1")
                // An en-US browser whatever the machine's locale, so the
                // numbers it groups are the ones the tests expect.
                .env("LANG", "en_US.UTF-8")
                .env("LANGUAGE", "en_US")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()))
        };
        if wait_for_port(&mut driver, port, Duration::from_secs(20)) {
            return (driver, port);
        }
    }
    panic!("chromedriver exited five times without listening (ports taken?)");
}

/// True once `port` listens; false if the driver exited first (its port
/// was taken). Panics if it neither listens nor exits in `timeout`.
fn wait_for_port(driver: &mut Child, port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if matches!(driver.try_wait(), Ok(Some(_))) {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen on port {port} within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}
