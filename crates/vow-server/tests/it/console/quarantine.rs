//! Quarantine review as an operator meets it: an event id that came back with another payload
//! is shown beside the payload that holds the id, with their differences; releasing it forwards
//! it to the destination (counted there). Markup in a payload stays text.

use fantoccini::Locator;
use serde_json::json;

use super::{Admin, Browser};
use crate::child::Vow;
use crate::helpers::TOKEN;
use crate::inbound::support::{stripe_signature, STRIPE_SECRET};
use crate::receiver::Receiver;

super::in_browser_on_both_stores!(an_operator_reviews_a_quarantined_event_and_releases_it);

async fn an_operator_reviews_a_quarantined_event_and_releases_it(database_url: String) {
    let destination = Receiver::start(&[]).await;
    let vow = Vow::start(&database_url, &[]).await;
    let admin = Admin::new(&vow);
    let (status, source) = admin
        .post(
            "/source",
            json!({"scheme": "stripe", "secrets": [STRIPE_SECRET], "description": "Stripe payments",
                   "destinations": [{"url": destination.url}]}),
        )
        .await;
    assert_eq!(status, 201, "{source}");
    let source_id = source["id"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let send = |body: &'static [u8]| {
        let ts = chrono::Utc::now().timestamp();
        http.post(format!("{}/in/{source_id}", vow.base))
            .header(
                "stripe-signature",
                stripe_signature(STRIPE_SECRET, ts, body),
            )
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let first: &[u8] = br#"{"id":"evt_1","amount":100,"note":"ok"}"#;
    let changed: &[u8] = br#"{"id":"evt_1","amount":999,"note":"<script>alert(1)</script>"}"#;
    assert_eq!(send(first).await.unwrap().status(), 200);
    destination.wait_for(1).await;
    let quarantined = send(changed).await.unwrap();
    assert_eq!(quarantined.status(), 202);
    let held: serde_json::Value = quarantined.json().await.unwrap();
    let event_id = held["id"].as_str().unwrap().to_string();

    let browser = Browser::start().await;
    let page = &browser.client;
    page.goto(&format!("{}/console/login", vow.base))
        .await
        .unwrap();
    browser.log_in(TOKEN).await;
    browser.reaches("/console").await;
    browser.click(Locator::LinkText("Inbound sources")).await;
    browser.reaches("/console/sources").await;
    browser
        .click(Locator::Css(&format!(
            "a[href='/console/source/{source_id}']"
        )))
        .await;
    browser
        .reaches(&format!("/console/source/{source_id}"))
        .await;
    browser.click(Locator::LinkText("quarantined")).await;
    let rows = page
        .find_all(Locator::Css("table.events tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "one quarantined event");
    let event_page = format!("/console/source/{source_id}/event/{event_id}");
    browser
        .click(Locator::Css(&format!("a[href='{event_page}']")))
        .await;
    browser.reaches(&event_page).await;

    // Both payloads, side by side, and what differs between them.
    assert!(browser.text("#held-payload").await.contains("100"));
    let newcomer = browser.text("#event-payload").await;
    assert!(newcomer.contains("999") && newcomer.contains("<script>alert(1)</script>"));
    let scripts = page
        .execute("return document.scripts.length", vec![])
        .await
        .unwrap();
    assert_eq!(scripts, json!(0), "the markup in the payload stayed text");
    let mut diff = Vec::new();
    for row in page
        .find_all(Locator::Css("table.diff tbody tr"))
        .await
        .unwrap()
    {
        diff.push(row.text().await.unwrap());
    }
    assert_eq!(diff.len(), 2, "{diff:?}");
    assert!(diff[0].starts_with("amount") && diff[0].contains("100") && diff[0].contains("999"));
    assert!(diff[1].starts_with("note"));
    browser.screenshot("console-quarantine").await;

    // Release: the event is forwarded, with the exact bytes it came with. The destination's
    // answer leaves its effect unknown, so the event turns uncertain.
    destination.answer_with_header("vow-outcome", "uncertain");
    browser.click(Locator::Id("release")).await;
    browser.reaches(&event_page).await;
    for _ in 0..200 {
        // The release posts back to this page; wait for the new one.
        let state = page.find(Locator::Css("#event-state")).await;
        if let Ok(el) = state {
            if el.text().await.unwrap_or_default() != "quarantined" {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_ne!(browser.text("#event-state").await, "quarantined");
    let arrived = destination.wait_for(2).await;
    assert_eq!(arrived[1].body, changed);
    let event_api = format!("/source/{source_id}/event/{event_id}");
    let mut stored = json!(null);
    for _ in 0..100 {
        stored = admin.get(&event_api).await;
        if stored["state"] == json!("uncertain") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(stored["state"], json!("uncertain"), "{stored}");

    // The operator settles it: it took effect. Nothing is forwarded again.
    page.refresh().await.unwrap();
    assert_eq!(browser.text("#event-state").await, "uncertain");
    browser.click(Locator::Id("settle-completed")).await;
    browser.text_becomes("#event-state", "completed").await;
    assert_eq!(admin.get(&event_api).await["state"], json!("completed"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(destination.received().len(), 2, "settling sent nothing");
}
