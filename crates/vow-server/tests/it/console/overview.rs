//! The Overview as an operator meets it: deliveries that failed (and dead-lettered) and then got
//! through, a disabled endpoint, and inbound traffic (stored, quarantined, refused), each
//! counted on the page as the store and the receivers saw it, the attempts drawn in the
//! chart's bars, and no script on the page.

use fantoccini::Locator;
use serde_json::json;

use super::{stats_reach, Admin, Browser};
use crate::child::Vow;
use crate::helpers::TOKEN;
use crate::inbound::support::{stripe_signature, STRIPE_SECRET};
use crate::receiver::Receiver;

super::in_browser_on_both_stores!(an_operator_reads_the_last_hour_on_the_overview);

async fn an_operator_reads_the_last_hour_on_the_overview(database_url: String) {
    // The receiver fails the first two deliveries (one attempt each, so both dead-letter), then
    // takes the next three.
    let receiver = Receiver::start(&[500, 503]).await;
    let destination = Receiver::start(&[]).await;
    let vow = Vow::start(&database_url, &[("VOW_RETRY_SCHEDULE", "none")]).await;
    let admin = Admin::new(&vow);
    let (status, _) = admin
        .post("/app", json!({"name": "Shop", "uid": "shop"}))
        .await;
    assert_eq!(status, 201);
    let (status, _) = admin
        .post(
            "/event-type",
            json!({"name": "order.paid", "description": "paid"}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, endpoint) = admin
        .post("/app/shop/endpoint", json!({"url": receiver.url}))
        .await;
    assert_eq!(status, 201);
    let stats = format!(
        "/app/shop/endpoint/{}/stats",
        endpoint["id"].as_str().unwrap()
    );
    // Another application's endpoint, disabled from the start.
    let (status, _) = admin
        .post("/app", json!({"name": "Other", "uid": "other"}))
        .await;
    assert_eq!(status, 201);
    let off = json!({"url": receiver.url, "disabled": true});
    assert_eq!(admin.post("/app/other/endpoint", off).await.0, 201);

    let send = |n: u32| {
        let body = json!({"eventType": "order.paid", "payload": {"order": n}});
        admin.post("/app/shop/msg", body)
    };
    for n in 0..2 {
        assert_eq!(send(n).await.0, 202);
    }
    receiver.wait_for(2).await;
    stats_reach(&admin, &stats, (0, 2)).await;
    for n in 2..5 {
        assert_eq!(send(n).await.0, 202);
    }
    receiver.wait_for(5).await;
    stats_reach(&admin, &stats, (3, 2)).await;

    // Inbound: an event (forwarded to the destination), its id again with another payload
    // (quarantined), and a request signed with the wrong secret (refused).
    let (status, source) = admin
        .post(
            "/source",
            json!({"scheme": "stripe", "secrets": [STRIPE_SECRET], "description": "Stripe",
                   "destinations": [{"url": destination.url}]}),
        )
        .await;
    assert_eq!(status, 201, "{source}");
    let source_id = source["id"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let inbound = |secret: &'static str, body: &'static [u8]| {
        let ts = chrono::Utc::now().timestamp();
        http.post(format!("{}/in/{source_id}", vow.base))
            .header("stripe-signature", stripe_signature(secret, ts, body))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let first: &[u8] = br#"{"id":"evt_1","amount":100}"#;
    let changed: &[u8] = br#"{"id":"evt_1","amount":999}"#;
    assert_eq!(inbound(STRIPE_SECRET, first).await.unwrap().status(), 200);
    destination.wait_for(1).await;
    assert_eq!(inbound(STRIPE_SECRET, changed).await.unwrap().status(), 202);
    let refused = inbound("whsec_not_the_secret", first).await.unwrap();
    assert!(refused.status().is_client_error(), "{}", refused.status());

    let browser = Browser::start().await;
    let page = &browser.client;
    page.goto(&format!("{}/", vow.base)).await.unwrap();
    browser.reaches("/console/login").await;
    browser.log_in(TOKEN).await;
    browser.reaches("/console").await;
    page.find(Locator::LinkText("Overview"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.reaches("/console/overview").await;

    // Everything happened within the hour, so the hour and the day agree.
    for window in ["hour", "day"] {
        for (figure, shown) in [
            ("succeeded", "3"),
            ("failed", "2"),
            ("success-rate", "60.0 %"),
            ("dead-lettered", "2"),
            ("dead-letter-rate", "40.0 %"),
            ("disabled", "0"),
            ("accepted", "2"),
            ("quarantined", "1"),
            ("uncertain", "0"),
            ("rejected", "1"),
        ] {
            let css = format!("#{window}-{figure}");
            assert_eq!(browser.text(&css).await, shown, "{css}");
        }
    }
    assert_eq!(browser.text("tr.reason code").await, "signature_mismatch");
    assert_eq!(browser.text("#backlog-due").await, "0");
    assert_eq!(browser.text("#backlog-oldest").await, "–");
    assert_eq!(browser.text("#endpoints-disabled").await, "1");
    assert_eq!(browser.text("#held-quarantined").await, "1");
    assert_eq!(browser.text("#held-uncertain").await, "0");

    // The chart: 24 hourly bars; the last holds the 3 succeeded under the 2 failed.
    let bars = page.find_all(Locator::Css("svg.chart g")).await.unwrap();
    assert_eq!(bars.len(), 24);
    for (class, n) in [("ok", 1), ("failed", 1)] {
        let rects = page
            .find_all(Locator::Css(&format!("svg.chart rect.{class}")))
            .await
            .unwrap();
        assert_eq!(rects.len(), n, "rect.{class}");
    }
    let last = page
        .find(Locator::Css("svg.chart g:last-of-type title"))
        .await
        .unwrap()
        .html(true)
        .await
        .unwrap();
    assert!(last.ends_with("3 succeeded, 2 failed"), "{last}");
    let scripts = page
        .execute("return document.scripts.length", vec![])
        .await
        .unwrap();
    assert_eq!(scripts, json!(0));
    browser.screenshot("console-overview").await;
}
