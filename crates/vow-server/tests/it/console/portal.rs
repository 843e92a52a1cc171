//! The app portal as a customer meets it: the link vow issues on Svix's route
//! (`POST /api/v1/auth/app-portal-access/{app_id}`, the request the Svix SDK's
//! `authentication.app_portal_access` sends) opens that application's pages under the owner's
//! brand; the customer adds an endpoint (stored, and delivered to); another application's ids,
//! forms without the CSRF token and a logged-out link are refused.

use fantoccini::Locator;
use reqwest::header::{CONTENT_SECURITY_POLICY, X_FRAME_OPTIONS};
use serde_json::json;

use super::{Admin, Browser};
use crate::child::Vow;
use crate::receiver::Receiver;

super::in_browser_on_both_stores!(a_customer_uses_the_portal_link_and_reaches_only_their_app);

async fn a_customer_uses_the_portal_link_and_reaches_only_their_app(database_url: String) {
    let receiver = Receiver::start(&[]).await;
    let vow = Vow::start(
        &database_url,
        &[
            ("VOW_PORTAL_BRAND_NAME", "Acme Webhooks"),
            ("VOW_PORTAL_BRAND_ACCENT", "#c2410c"),
            ("VOW_PORTAL_FRAME_ANCESTORS", "https://app.acme.example"),
        ],
    )
    .await;
    let admin = Admin::new(&vow);
    for (name, uid) in [("Acme", "acme"), ("Other", "other")] {
        assert_eq!(
            admin
                .post("/app", json!({"name": name, "uid": uid}))
                .await
                .0,
            201
        );
    }
    let (status, _) = admin
        .post(
            "/event-type",
            json!({"name": "invoice.paid", "description": "An invoice was paid"}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, theirs) = admin
        .post(
            "/app/other/endpoint",
            json!({"url": "https://other.example/hook"}),
        )
        .await;
    let other_ep = theirs["id"].as_str().unwrap().to_string();

    // What the Svix SDK sends: `{}` on Svix's route, with the admin token.
    let (status, access) = admin.post("/auth/app-portal-access/acme", json!({})).await;
    assert_eq!(status, 200, "{access}");
    let url = access["url"].as_str().unwrap().to_string();
    let token = access["token"].as_str().unwrap().to_string();
    assert_eq!(url, format!("{}/portal/{token}", vow.base));
    let portal = format!("/portal/{token}");

    // The portal is framed only where configured, and sends no script.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let head = http.get(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let csp = head.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.ends_with("frame-ancestors https://app.acme.example"),
        "{csp}"
    );
    assert!(!csp.contains("script-src") && csp.starts_with("default-src 'none'"));
    assert!(head.headers().get(X_FRAME_OPTIONS).is_none());

    let browser = Browser::start().await;
    let page = &browser.client;
    page.goto(&url).await.unwrap();
    browser.reaches(&portal).await;
    assert_eq!(browser.text(".brand").await, "Acme Webhooks");
    assert_eq!(browser.text("h1").await, "Acme");
    assert!(
        page.find(Locator::Css("form.logout")).await.is_err(),
        "no console session here"
    );
    assert_eq!(
        page.execute("return document.scripts.length", vec![])
            .await
            .unwrap(),
        json!(0)
    );

    // The customer adds an endpoint for one event type.
    browser.click(Locator::Id("new-endpoint")).await;
    browser.reaches(&format!("{portal}/endpoint/new")).await;
    page.find(Locator::Css("input[name=url]"))
        .await
        .unwrap()
        .send_keys(&receiver.url)
        .await
        .unwrap();
    browser
        .click(Locator::Css(
            "input[name=event_types][value='invoice.paid']",
        ))
        .await;
    browser.screenshot("portal-new-endpoint").await;
    browser.click(Locator::Css("form.stacked button")).await;
    let mut listed = json!(null);
    for _ in 0..100 {
        // The click returns before the form's post has been answered.
        listed = admin.get("/app/acme/endpoint").await;
        if !listed["data"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let data = listed["data"].as_array().unwrap();
    assert_eq!(
        data.len(),
        1,
        "{listed} {} {}",
        browser.path().await,
        browser.client.source().await.unwrap()
    );
    assert_eq!(data[0]["url"], json!(receiver.url));
    assert_eq!(data[0]["eventTypes"], json!(["invoice.paid"]));
    let ep = data[0]["id"].as_str().unwrap().to_string();
    browser.reaches(&format!("{portal}/endpoint/{ep}")).await;

    // It is delivered to like any endpoint, and the customer sees the attempt.
    let body = json!({"eventType": "invoice.paid", "payload": {"invoice": 7}});
    assert_eq!(admin.post("/app/acme/msg", body).await.0, 202);
    receiver.wait_for(1).await;
    let mut rows = 0;
    for _ in 0..50 {
        page.refresh().await.unwrap();
        rows = page
            .find_all(Locator::Css("table.attempts tbody tr"))
            .await
            .unwrap()
            .len();
        if rows == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(rows, 1);
    page.goto(&url).await.unwrap();
    browser.reaches(&portal).await;
    browser.screenshot("portal-endpoints").await;

    // Another application's endpoint is not found, in the pages and through the API.
    page.goto(&format!("{url}/endpoint/{other_ep}"))
        .await
        .unwrap();
    assert_eq!(browser.text("h1").await, "Not Found");
    let theirs = http
        .get(format!("{}/api/v1/app/other/endpoint/{other_ep}", vow.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), 404);
    let apps = http
        .get(format!("{}/api/v1/app", vow.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(apps.status(), 403);

    // A form without the link's CSRF token changes nothing.
    let forged = http
        .post(format!("{url}/endpoint/{ep}/state"))
        .form(&[("csrf", "guessed"), ("disabled", "true")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let stored = admin.get(&format!("/app/acme/endpoint/{ep}")).await;
    assert_eq!(stored["disabled"], json!(false));

    // Logged out (Svix's route, with the token): the link opens nothing any more.
    let out = http
        .post(format!("{}/api/v1/auth/logout", vow.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    let after = http.get(&url).send().await.unwrap();
    assert_eq!(after.status(), 401);
}
