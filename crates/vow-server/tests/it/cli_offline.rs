//! `vow sign` and `vow verify` as a user runs them: the real binary, no server. What `vow sign`
//! prints is checked with vow's verifier and with an HMAC computed here, independently;
//! `vow verify` is checked for its exit status and for naming each kind of failure.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use vow_signature::provider::Scheme;
use vow_signature::{Verifier, VerifyingKey, WebhookHeaders};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const T: u64 = 1_700_000_000;
const BODY: &str = r#"{"type":"invoice.paid","amount":4200}"#;

/// Runs `vow args…` with `stdin`, in an empty environment (no profile, no colour settings).
fn vow(args: &[&str], stdin: &[u8]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vow"))
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `vow sign … -o json` as a map of headers; the command must succeed.
fn sign_json(args: &[&str], stdin: &[u8]) -> serde_json::Map<String, Value> {
    let mut all = vec!["sign", "-o", "json"];
    all.extend_from_slice(args);
    let out = vow(&all, stdin);
    assert!(out.status.success(), "{}", stderr(&out));
    match serde_json::from_str(&stdout(&out)).unwrap() {
        Value::Object(map) => map,
        other => panic!("not an object of headers: {other}"),
    }
}

fn header<'a>(headers: &'a serde_json::Map<String, Value>, name: &str) -> &'a str {
    headers[name].as_str().unwrap()
}

/// Standard Webhooks `v1`, computed here: base64(HMAC-SHA256(base64-decoded key,
/// "id.timestamp.body")).
fn standard_v1(secret: &str, id: &str, timestamp: u64, body: &[u8]) -> String {
    let key = STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

fn hex_hmac(key: &[u8], content: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(content);
    hex::encode(mac.finalize().into_bytes())
}

fn verifies(headers: &serde_json::Map<String, Value>, key: &str, body: &[u8], now: u64) -> bool {
    let wh = WebhookHeaders::from_lookup(|name| headers.get(name)?.as_str().map(str::as_bytes));
    let key: VerifyingKey = key.parse().unwrap();
    Verifier::new([key]).verify_at(&wh, body, now).is_ok()
}

#[test]
fn sign_prints_standard_webhooks_headers_that_verify_both_ways() {
    let t = T.to_string();
    let headers = sign_json(
        &[
            "--secret",
            SECRET,
            "--data",
            BODY,
            "--id",
            "msg_1",
            "--timestamp",
            &t,
        ],
        b"",
    );
    assert_eq!(header(&headers, "webhook-id"), "msg_1");
    assert_eq!(header(&headers, "webhook-timestamp"), t);
    assert_eq!(
        header(&headers, "webhook-signature"),
        standard_v1(SECRET, "msg_1", T, BODY.as_bytes())
    );
    assert_eq!(
        header(&headers, "svix-signature"),
        header(&headers, "webhook-signature")
    );
    assert!(verifies(&headers, SECRET, BODY.as_bytes(), T + 10));
    assert!(!verifies(&headers, SECRET, b"{}", T));
}

#[test]
fn sign_prints_name_value_lines_without_colour_codes() {
    let t = T.to_string();
    let out = vow(
        &[
            "sign",
            "--secret",
            SECRET,
            "--data",
            BODY,
            "--id",
            "msg_1",
            "--timestamp",
            &t,
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains('\x1b'), "{text:?}");
    let lines: Vec<&str> = text.lines().collect();
    let signature = standard_v1(SECRET, "msg_1", T, BODY.as_bytes());
    assert_eq!(
        lines,
        [
            "webhook-id: msg_1".to_string(),
            format!("webhook-timestamp: {T}"),
            format!("webhook-signature: {signature}"),
            "svix-id: msg_1".to_string(),
            format!("svix-timestamp: {T}"),
            format!("svix-signature: {signature}"),
        ]
    );
}

#[test]
fn sign_with_several_secrets_makes_one_entry_each_and_a_whsk_key_signs_v1a() {
    let t = T.to_string();
    let ed25519 = vow_signature::AsymmetricKey::from_seed(&[7u8; 32]);
    let whsk = ed25519.to_string();
    let whpk = ed25519.public_key().to_string();
    let headers = sign_json(
        &[
            "--secret",
            SECRET,
            "--secret",
            OTHER_SECRET,
            "--secret",
            &whsk,
            "--data",
            BODY,
            "--id",
            "msg_2",
            "--timestamp",
            &t,
        ],
        b"",
    );
    let entries: Vec<&str> = header(&headers, "webhook-signature").split(' ').collect();
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert_eq!(entries[0], standard_v1(SECRET, "msg_2", T, BODY.as_bytes()));
    assert_eq!(
        entries[1],
        standard_v1(OTHER_SECRET, "msg_2", T, BODY.as_bytes())
    );
    assert!(entries[2].starts_with("v1a,"), "{entries:?}");
    for key in [SECRET, OTHER_SECRET, whpk.as_str()] {
        assert!(verifies(&headers, key, BODY.as_bytes(), T), "{key}");
    }
}

#[test]
fn sign_covers_the_seed_styles_keyed_by_the_secret_text() {
    let t = T.to_string();
    let text = "whsec_demo_secret";
    let sha = sign_json(
        &[
            "--style", "sha256", "--secret", text, "--data", BODY, "--id", "msg_3",
        ],
        b"",
    );
    assert_eq!(header(&sha, "x-delivery-id"), "msg_3");
    assert_eq!(
        header(&sha, "x-signature"),
        format!("sha256={}", hex_hmac(text.as_bytes(), BODY.as_bytes()))
    );
    let timestamped = sign_json(
        &[
            "--style",
            "timestamped",
            "--secret",
            text,
            "--data",
            BODY,
            "--timestamp",
            &t,
        ],
        b"",
    );
    let expected = hex_hmac(text.as_bytes(), format!("{T}.{BODY}").as_bytes());
    assert_eq!(
        header(&timestamped, "x-signature"),
        format!("t={T},v1={expected}")
    );
    vow_signature::seed::timestamped::verify_at(
        text,
        Some(header(&timestamped, "x-signature").as_bytes()),
        BODY.as_bytes(),
        T,
    )
    .unwrap();
}

#[test]
fn sign_reads_the_body_byte_for_byte_from_a_file_or_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let body = b"{\"a\":1}\r\n\xff";
    let path = dir.path().join("body");
    std::fs::write(&path, body).unwrap();
    let at = format!("@{}", path.display());
    let t = T.to_string();
    let args = |data: &str| -> Vec<String> {
        [
            "--secret",
            SECRET,
            "--id",
            "msg_4",
            "--timestamp",
            &t,
            "--data",
            data,
        ]
        .map(String::from)
        .to_vec()
    };
    let (file_args, stdin_args) = (args(&at), args("-"));
    let from_file = sign_json(
        &file_args.iter().map(String::as_str).collect::<Vec<_>>(),
        b"",
    );
    let from_stdin = sign_json(
        &stdin_args.iter().map(String::as_str).collect::<Vec<_>>(),
        body,
    );
    let expected = standard_v1(SECRET, "msg_4", T, body);
    assert_eq!(header(&from_file, "webhook-signature"), expected);
    assert_eq!(header(&from_stdin, "webhook-signature"), expected);
}

#[test]
fn sign_defaults_to_a_new_id_and_now() {
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = sign_json(&["--secret", SECRET, "--data", BODY], b"");
    let ts: u64 = header(&headers, "webhook-timestamp").parse().unwrap();
    assert!((before..=before + 60).contains(&ts), "{ts} vs {before}");
    assert!(header(&headers, "webhook-id").starts_with("msg_"));
    assert!(verifies(&headers, SECRET, BODY.as_bytes(), ts));
}

#[test]
fn sign_refuses_an_unusable_secret_naming_the_flag() {
    let out = vow(
        &["sign", "--secret", "whsec_not base64!", "--data", "{}"],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("--secret: secret 1 is not a usable key"),
        "{err}"
    );
    assert!(err.contains("base64"), "{err}");
    assert!(out.stdout.is_empty());
}

/// A captured Standard Webhooks request for `body`, signed by `vow sign` with `SECRET` at
/// `T`, as a raw HTTP request file.
fn captured_request(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    let t = T.to_string();
    let out = vow(
        &[
            "sign",
            "--secret",
            SECRET,
            "--data",
            body,
            "--id",
            "msg_5",
            "--timestamp",
            &t,
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let raw = format!(
        "POST /hook HTTP/1.1\r\nHost: receiver.example\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{}\r\n{body}",
        body.len(),
        stdout(&out).replace('\n', "\r\n")
    );
    let path = dir.join("request.http");
    std::fs::write(&path, raw).unwrap();
    path
}

fn verify(args: &[&str]) -> Output {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    vow(&all, b"")
}

/// Asserts `vow verify` said invalid (exit 1) with `wanted` in its message.
fn assert_invalid(out: &Output, wanted: &str) {
    let text = stdout(out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(out));
    assert!(text.starts_with("invalid: "), "{text}");
    assert!(text.contains(wanted), "wanted {wanted:?} in {text:?}");
}

#[test]
fn verify_accepts_what_sign_signed() {
    let dir = tempfile::tempdir().unwrap();
    let request = captured_request(dir.path(), BODY);
    let request = request.to_str().unwrap();
    let now = (T + 30).to_string();
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--request",
        request,
        "--now",
        &now,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(text.starts_with("valid: "), "{text}");
    assert!(
        text.contains("id msg_5") && text.contains("30 s old"),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "{text:?}");
}

#[test]
fn verify_names_a_wrong_secret() {
    let dir = tempfile::tempdir().unwrap();
    let request = captured_request(dir.path(), BODY);
    let t = T.to_string();
    let out = verify(&[
        "--scheme",
        "svix",
        "--secret",
        OTHER_SECRET,
        "--request",
        request.to_str().unwrap(),
        "--now",
        &t,
    ]);
    assert_invalid(
        &out,
        "wrong secret: the signature is well-formed but does not match the secret given",
    );
}

#[test]
fn verify_names_a_changed_body_and_where_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    let request = captured_request(dir.path(), BODY);
    // The same request with the amount changed, as a proxy might have rewritten it.
    let tampered = std::fs::read_to_string(&request)
        .unwrap()
        .replace("4200", "9900");
    let tampered_path = dir.path().join("tampered.http");
    std::fs::write(&tampered_path, tampered).unwrap();
    let expected = dir.path().join("expected.json");
    std::fs::write(&expected, BODY).unwrap();
    let t = T.to_string();
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--request",
        tampered_path.to_str().unwrap(),
        "--expected-body",
        expected.to_str().unwrap(),
        "--now",
        &t,
    ]);
    let offset = BODY.find("4200").unwrap();
    assert_invalid(
        &out,
        &format!("body changed: the signature matches --expected-body, not this body; it differs from --expected-body from byte {offset} on"),
    );
    // Without the expected body, the same request can only be a wrong secret (or a change).
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--request",
        tampered_path.to_str().unwrap(),
        "--now",
        &t,
    ]);
    assert_invalid(&out, "wrong secret");
    assert_invalid(&out, "--expected-body FILE tells which");
}

#[test]
fn verify_says_by_how_much_a_timestamp_is_outside_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let request = captured_request(dir.path(), BODY);
    let request = request.to_str().unwrap();
    let late = (T + 812).to_string();
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--request",
        request,
        "--now",
        &late,
    ]);
    assert_invalid(
        &out,
        "timestamp outside the window: timestamp 1700000000 is 812 s old: 512 s older than the 300 s window allows",
    );
    let early = (T - 100).to_string();
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--request",
        request,
        "--now",
        &early,
        "--tolerance",
        "60",
    ]);
    assert_invalid(
        &out,
        "100 s in the future: 40 s newer than the 60 s window allows",
    );
}

#[test]
fn verify_names_a_missing_and_a_malformed_header() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, BODY).unwrap();
    let body = body.to_str().unwrap();
    let headers = dir.path().join("headers.txt");
    let t = T.to_string();

    std::fs::write(
        &headers,
        format!("webhook-id: msg_1\nwebhook-timestamp: {T}\n"),
    )
    .unwrap();
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--headers",
        headers.to_str().unwrap(),
        "--body",
        body,
        "--now",
        &t,
    ]);
    assert_invalid(&out, "header missing: `webhook-signature`");

    let signature = standard_v1(SECRET, "msg_1", T, BODY.as_bytes());
    std::fs::write(
        &headers,
        format!("webhook-id: msg_1\nwebhook-timestamp: 17e8\nwebhook-signature: {signature}\n"),
    )
    .unwrap();
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--headers",
        headers.to_str().unwrap(),
        "--body",
        body,
        "--now",
        &t,
    ]);
    assert_invalid(
        &out,
        "header malformed: `webhook-timestamp`: timestamp is not an unsigned integer",
    );

    // The same headers, well-formed, verify: the failures above were the headers' alone.
    std::fs::write(
        &headers,
        format!("webhook-id: msg_1\nwebhook-timestamp: {T}\nwebhook-signature: {signature}\n"),
    )
    .unwrap();
    let out = verify(&[
        "--scheme",
        "standard-webhooks",
        "--secret",
        SECRET,
        "--headers",
        headers.to_str().unwrap(),
        "--body",
        body,
        "--now",
        &t,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn verify_checks_a_provider_scheme_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "It's a Secret to Everybody";
    let body = dir.path().join("body");
    std::fs::write(&body, "Hello, World!").unwrap();
    let headers = dir.path().join("headers");
    let mac = hex_hmac(secret.as_bytes(), b"Hello, World!");
    std::fs::write(&headers, format!("X-Hub-Signature-256: sha256={mac}\n")).unwrap();
    let args = |secret: &str| {
        verify(&[
            "--scheme",
            "github",
            "--secret",
            secret,
            "--headers",
            headers.to_str().unwrap(),
            "--body",
            body.to_str().unwrap(),
            "-o",
            "json",
        ])
    };
    let good = args(secret);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    let report: Value = serde_json::from_str(&stdout(&good)).unwrap();
    assert_eq!(
        (report["valid"].as_bool(), report["scheme"].as_str()),
        (Some(true), Some("github"))
    );
    let bad = args("another secret");
    assert_eq!(bad.status.code(), Some(1));
    let report: Value = serde_json::from_str(&stdout(&bad)).unwrap();
    assert_eq!(
        (report["valid"].as_bool(), report["failure"].as_str()),
        (Some(false), Some("wrong_secret"))
    );
}

#[test]
fn verify_usage_errors_exit_2_and_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let request = captured_request(dir.path(), BODY);
    let request = request.to_str().unwrap();
    let unknown = verify(&["--scheme", "nope", "--secret", SECRET, "--request", request]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("invalid value 'nope' for '--scheme"),
        "{}",
        stderr(&unknown)
    );
    let missing = dir.path().join("missing.http");
    let out = verify(&[
        "--scheme",
        "stripe",
        "--secret",
        "whsec_x",
        "--request",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--request: cannot read"),
        "{}",
        stderr(&out)
    );
    let out = verify(&[
        "--scheme",
        "discord",
        "--secret",
        "not-hex",
        "--request",
        request,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("invalid key"), "{}", stderr(&out));
}

#[test]
fn verify_offers_exactly_the_schemes_inbound_sources_support() {
    let out = vow(&["verify", "--help"], b"");
    let help = stdout(&out);
    for scheme in Scheme::NAMED {
        assert!(
            help.contains(scheme.as_str()),
            "{scheme} missing from:\n{help}"
        );
    }
    assert!(help.contains("hmac"), "{help}");
}

#[test]
fn every_command_s_help_shows_an_example() {
    let root = vow(&["--help"], b"");
    let help = stdout(&root);
    assert!(help.contains("Examples:"), "{help}");
    for command in [
        "serve",
        "migrate",
        "demo",
        "config-defaults",
        "sign",
        "verify",
        "send",
        "login",
        "completions",
    ] {
        let out = vow(&[command, "--help"], b"");
        assert!(out.status.success(), "{command}: {}", stderr(&out));
        let help = stdout(&out);
        assert!(help.contains("Example"), "{command} --help:\n{help}");
        assert!(
            help.contains(&format!("vow {command}")),
            "{command} --help:\n{help}"
        );
    }
}

#[test]
fn completions_are_scripts_for_each_shell_naming_the_commands() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef vow"),
        ("fish", "complete -c vow"),
    ] {
        let out = vow(&["completions", shell], b"");
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.contains(marker), "{shell}: {script}");
        for command in ["sign", "verify", "send", "login"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
}

/// `vow verify`'s verdict on a terminal (a pseudo-terminal from util-linux's `script`), with
/// and without `NO_COLOR`.
fn verify_on_a_terminal(no_color: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let request = captured_request(dir.path(), BODY);
    let command = format!(
        "'{}' verify --scheme standard-webhooks --secret '{SECRET}' --request '{}' --now {T}",
        env!("CARGO_BIN_EXE_vow"),
        request.display()
    );
    let mut script = Command::new("script");
    script
        .args(["-qec", &command, "/dev/null"])
        .env_clear()
        .env("HOME", dir.path())
        .env("TERM", "xterm")
        .stdin(Stdio::null());
    if no_color {
        script.env("NO_COLOR", "1");
    }
    let out = script.output().expect("util-linux `script` runs");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn colour_only_on_a_terminal_and_never_under_no_color() {
    let coloured = verify_on_a_terminal(false);
    assert!(coloured.contains("\x1b[32mvalid:\x1b[0m"), "{coloured:?}");
    let plain = verify_on_a_terminal(true);
    assert!(plain.starts_with("valid: "), "{plain:?}");
    assert!(!plain.contains('\x1b'), "{plain:?}");
}
