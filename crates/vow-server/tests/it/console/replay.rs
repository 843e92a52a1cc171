//! An endpoint's outage as an operator meets it: the failures on the endpoint's page, then the
//! dead letters replayed with the button (the dry run's count first, then confirm, then the
//! progress page) and counted at the receiver; and the endpoint disabled and enabled again.

use std::collections::BTreeSet;
use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;

use super::{stats_reach, Admin, Browser};
use crate::child::Vow;
use crate::helpers::TOKEN;
use crate::receiver::Receiver;

super::in_browser_on_both_stores!(an_operator_sees_an_outage_and_replays_its_dead_letters);

async fn an_operator_sees_an_outage_and_replays_its_dead_letters(database_url: String) {
    // The receiver is down for the first two deliveries; one attempt each, so both dead-letter.
    let receiver = Receiver::start(&[500, 503]).await;
    let vow = Vow::start(&database_url, &[("VOW_RETRY_SCHEDULE", "none")]).await;
    let admin = Admin::new(&vow);
    let (status, app) = admin
        .post("/app", json!({"name": "Shop", "uid": "shop"}))
        .await;
    assert_eq!(status, 201);
    let app_id = app["id"].as_str().unwrap().to_string();
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
    let ep = endpoint["id"].as_str().unwrap().to_string();
    let mut keyed = String::new();
    for n in 0..2 {
        let body = json!({"eventType": "order.paid", "payload": {"order": n}});
        let key = format!("order-{n}");
        let (status, created) = admin.post_keyed("/app/shop/msg", body, Some(&key)).await;
        assert_eq!(status, 202);
        if n == 0 {
            keyed = created["id"].as_str().unwrap().to_string();
        }
    }
    receiver.wait_for(2).await;
    let stats = format!("/app/shop/endpoint/{ep}/stats");
    stats_reach(&admin, &stats, (0, 2)).await;

    let browser = Browser::start().await;
    let page = &browser.client;
    page.goto(&format!("{}/console", vow.base)).await.unwrap();
    browser.reaches("/console/login").await;
    browser.log_in(TOKEN).await;
    browser.reaches("/console").await;
    let endpoint_page = format!("/console/app/{app_id}/endpoint/{ep}");
    page.goto(&format!("{}/console/app/{app_id}", vow.base))
        .await
        .unwrap();
    // The endpoint's health in the list, from its two failed attempts.
    assert_eq!(browser.text("td.rate").await, "0.0 % of 2");
    assert!(browser.text("td.latency").await.ends_with(" ms"));
    let last_failure = browser.text("td.lastfail").await;
    assert!(last_failure.contains("HTTP 50"), "{last_failure}");
    browser
        .click(Locator::Css(&format!("a[href='{endpoint_page}']")))
        .await;
    browser.reaches(&endpoint_page).await;

    // The outage on the page: both dead letters, both failed attempts with their statuses.
    let dead = page
        .find_all(Locator::Css("table.dead tbody tr"))
        .await
        .unwrap();
    assert_eq!(dead.len(), 2);
    let mut codes = Vec::new();
    for row in page
        .find_all(Locator::Css("table.attempts tbody tr.failed"))
        .await
        .unwrap()
    {
        codes.push(
            row.find(Locator::Css("td:nth-child(3)"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        );
    }
    codes.sort();
    assert_eq!(codes, ["500", "503"]);
    assert!(browser.text(".lastfail").await.contains("HTTP 5"));
    browser.screenshot("console-endpoint").await;

    // The receiver is fixed. The button counts first (a dry run sends nothing)...
    browser.click(Locator::Css("form.replay button")).await;
    browser.reaches(&format!("{endpoint_page}/replay")).await;
    assert_eq!(browser.text("#dry-run-count").await, "2");
    assert_eq!(receiver.received().len(), 2, "the dry run sent nothing");
    browser.screenshot("console-replay-confirm").await;

    // ...then confirm replays them, and the progress page follows them until delivered.
    browser.click(Locator::Id("confirm-replay")).await;
    let arrived = receiver.wait_for(4).await;
    let ids = |rs: &[crate::receiver::Received]| -> BTreeSet<String> {
        rs.iter()
            .map(|r| r.header("webhook-id").to_string())
            .collect()
    };
    assert_eq!(
        ids(&arrived[..2]),
        ids(&arrived[2..]),
        "the same two messages, once each"
    );
    stats_reach(&admin, &stats, (2, 0)).await;
    let mut shown = String::new();
    for _ in 0..100 {
        // The page reloads itself every 2 s; read it between reloads.
        if let Ok(el) = page.find(Locator::Css("h1")).await {
            shown = el.text().await.unwrap_or_default();
            if shown == "Replay finished" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(shown, "Replay finished");
    assert_eq!(browser.text("#requeued").await, "2");
    assert_eq!(browser.text("#delivered").await, "2");
    assert_eq!(browser.text("#failed").await, "0");
    browser.screenshot("console-replay-done").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 4, "nothing was sent twice");

    // The messages: both listed; a search by id opens one, delivered on its second attempt.
    page.goto(&format!("{}/console/app/{app_id}/messages", vow.base))
        .await
        .unwrap();
    let listed = page
        .find_all(Locator::Css("table.messages tbody tr"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    let msg_id = arrived[0].header("webhook-id").to_string();
    let field = page.find(Locator::Css("input[name=id]")).await.unwrap();
    field.send_keys(&msg_id).await.unwrap();
    browser.click(Locator::Css("form.search button")).await;
    browser
        .reaches(&format!("/console/app/{app_id}/msg/{msg_id}"))
        .await;
    assert!(browser.text("#payload").await.contains("\"order\""));
    assert_eq!(browser.text("table.destinations .state").await, "success");
    let tries = page
        .find_all(Locator::Css("table.attempts tbody tr"))
        .await
        .unwrap();
    assert_eq!(tries.len(), 2, "the failed attempt and the replayed one");
    browser.screenshot("console-message").await;

    // The Idempotency-Key inspector finds the first message's key and links the message.
    page.goto(&format!(
        "{}/console/idempotency?key=order-0&route=message.create&app=shop",
        vow.base
    ))
    .await
    .unwrap();
    assert_eq!(browser.text("#key-state").await, "completed");
    assert_eq!(browser.text("#key-fingerprint").await, "2");
    assert_eq!(browser.text("#key-resource").await, keyed);
    browser.screenshot("console-idempotency").await;
    browser.click(Locator::Css("#key-resource a")).await;
    browser
        .reaches(&format!("/console/app/shop/msg/{keyed}"))
        .await;
    page.goto(&format!(
        "{}/console/idempotency?key=never-used&route=message.create&app=shop",
        vow.base
    ))
    .await
    .unwrap();
    assert!(browser
        .text("#key-free")
        .await
        .starts_with("vow holds nothing"));

    // Disable, then enable: the page says so and the store holds it.
    page.goto(&format!("{}{endpoint_page}", vow.base))
        .await
        .unwrap();
    browser.click(Locator::Css(".actions button")).await;
    browser.reaches(&endpoint_page).await;
    assert!(browser
        .text(".notice")
        .await
        .starts_with("Endpoint disabled"));
    let stored = admin.get(&format!("/app/shop/endpoint/{ep}")).await;
    assert_eq!(stored["disabled"], json!(true));
    assert!(browser.text(".why").await.starts_with("by an operator"));
    browser.click(Locator::Css(".actions button")).await;
    browser
        .text_becomes(".notice", "Endpoint enabled: deliveries resume.")
        .await;
    let stored = admin.get(&format!("/app/shop/endpoint/{ep}")).await;
    assert_eq!(stored["disabled"], json!(false));
}
