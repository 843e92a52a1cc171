//! Logging in and out, the applications list, CSRF refusals and the login throttle.

use fantoccini::Locator;
use reqwest::header::{COOKIE, LOCATION, ORIGIN, RETRY_AFTER};
use reqwest::redirect::Policy;
use serde_json::json;

use super::Browser;
use crate::child::Vow;
use crate::helpers::TOKEN;
use crate::receiver::Receiver;

/// An application whose name is markup, an endpoint at `receiver`, and one message delivered
/// there; returns the application's id.
async fn one_delivered_message(vow: &Vow, receiver: &Receiver) -> String {
    let api = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        api.post(format!("{}/api/v1{path}", vow.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    let app: serde_json::Value = post(
        "/app",
        json!({"name": "<script>alert('x')</script>Acme", "uid": "acme"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let app_id = app["id"].as_str().unwrap().to_string();
    let endpoint = post(
        "/app/acme/endpoint",
        json!({"url": receiver.url, "description": "<b>bold</b> hooks"}),
    )
    .await
    .unwrap();
    assert_eq!(endpoint.status(), 201);
    let message = post(
        "/app/acme/msg",
        json!({"eventType": "invoice.paid", "payload": {"n": 1}}),
    )
    .await
    .unwrap();
    assert_eq!(message.status(), 202);
    receiver.wait_for(1).await;
    app_id
}

async fn an_operator_logs_in_sees_endpoint_health_and_logs_out(database_url: String) {
    let receiver = Receiver::start(&[]).await;
    let vow = Vow::start(&database_url, &[]).await;
    let app_id = one_delivered_message(&vow, &receiver).await;
    let browser = Browser::start().await;
    let page = &browser.client;

    // Not logged in: sent to the login page, where a wrong token is refused by name.
    page.goto(&format!("{}/console", vow.base)).await.unwrap();
    browser.reaches("/console/login").await;
    browser.screenshot("console-login").await;
    browser.log_in("not-the-token").await;
    browser.reaches("/console/login").await;
    assert_eq!(
        browser.text(".error").await,
        "That token is not the admin token."
    );

    // The admin token opens the applications; a name holding markup shows as text.
    browser.log_in(TOKEN).await;
    browser.reaches("/console").await;
    let link = browser
        .text(&format!("a[href='/console/app/{app_id}']"))
        .await;
    assert_eq!(link, "<script>alert('x')</script>Acme");
    let scripts = page
        .execute("return document.scripts.length", vec![])
        .await
        .unwrap();
    assert_eq!(scripts, json!(0), "the markup in the name stayed inert");
    browser.screenshot("console-applications").await;

    // The application's page: the endpoint, enabled.
    browser
        .click(Locator::Css(&format!("a[href='/console/app/{app_id}']")))
        .await;
    browser.reaches(&format!("/console/app/{app_id}")).await;
    assert_eq!(browser.text("tbody .url").await, receiver.url);
    assert_eq!(browser.text("tbody small").await, "<b>bold</b> hooks");
    assert_eq!(browser.text("tbody .state").await, "enabled");
    // Its health, from its one attempt (a success: no last failure).
    assert_eq!(browser.text("td.rate").await, "100.0 % of 1");
    let latency = browser.text("td.latency").await;
    assert!(latency.ends_with(" ms"), "{latency}");
    assert_eq!(browser.text("td.lastfail").await, "–");
    assert_eq!(receiver.received().len(), 1);
    browser.screenshot("console-application").await;

    // A form post without the session's CSRF token, or from another site, changes nothing.
    let secret = page
        .get_named_cookie("vow_console")
        .await
        .unwrap()
        .value()
        .to_string();
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let cookie = format!("vow_console={secret}");
    let logout = format!("{}/console/logout", vow.base);
    let forged = http
        .post(&logout)
        .header(COOKIE, &cookie)
        .form(&[("csrf", "guessed")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let csrf = page
        .find(Locator::Css("form.logout input[name=csrf]"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    let cross_site = http
        .post(&logout)
        .header(COOKIE, &cookie)
        .header(ORIGIN, "https://evil.example")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    let still_in = http
        .get(format!("{}/console", vow.base))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(still_in.status(), 200, "the refused posts ended nothing");

    // Logging out ends the session in the store: the old cookie opens nothing any more.
    browser.click(Locator::Css("form.logout button")).await;
    browser.reaches("/console/login").await;
    let after = http
        .get(format!("{}/console", vow.base))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 303);
    assert_eq!(after.headers()[LOCATION], "/console/login");
    browser.client.clone().close().await.unwrap();

    // Repeated wrong tokens from one address are slowed: after three free failures, each sets
    // a wait (1 s, 2 s, 4 s, ...), and an attempt inside it is refused unchecked, with
    // Retry-After. (Up to 8 attempts, so a slow machine that lets one wait pass still sees one.)
    let mut codes = Vec::new();
    let mut retry_after = None;
    for _ in 0..8 {
        let r = http
            .post(format!("{}/console/login", vow.base))
            .form(&[("token", "wrong")])
            .send()
            .await
            .unwrap();
        codes.push(r.status().as_u16());
        if r.status() == 429 {
            retry_after = r.headers().get(RETRY_AFTER).cloned();
            break;
        }
    }
    assert_eq!(codes[..4], [401, 401, 401, 401], "{codes:?}");
    assert_eq!(codes.last(), Some(&429), "{codes:?}");
    let secs: u64 = retry_after.unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&secs), "Retry-After {secs}");
}

super::in_browser_on_both_stores!(an_operator_logs_in_sees_endpoint_health_and_logs_out);
