//! The rejection log is bounded per source (issue 13, defect 4), on both stores: a flood of bad
//! signatures to `/in/{source_id}` leaves only the newest `inbound_rejections_kept` rows, while
//! the counts by reason stay exact. Rows are counted in the store, not only in the API.

use super::support::*;
use crate::helpers::{into_parts, test_config_toml, TestApp};

on_both_stores!(a_flood_of_bad_signatures_keeps_bounded_rows_and_exact_counts,);

async fn a_flood_of_bad_signatures_keeps_bounded_rows_and_exact_counts(app: TestApp) {
    let config = test_config_toml("inbound_rejections_kept = 10");
    let app = TestApp::spawn_with(app.backend, config).await;
    let source = github_source(&app).await;
    let other = github_source(&app).await;
    let body = br#"{"zen":"flood"}"#;
    let forged = github_signature("not the secret", body);
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..40 {
        let request = app
            .client
            .post(format!("{}/in/{source}", app.base))
            .header("x-hub-signature-256", &forged)
            .header("x-github-delivery", format!("guid-{i}"))
            .body(body.to_vec());
        flood.spawn(async move { into_parts(request.send().await.unwrap()).await });
    }
    for outcome in flood.join_all().await {
        assert_refused(&outcome, 401, "signature_mismatch");
    }
    for _ in 0..3 {
        let unsigned = deliver(&app, &format!("/in/{source}"), &[], body).await;
        assert_refused(&unsigned, 400, "missing_header");
    }
    let theirs = deliver(&app, &format!("/in/{other}"), &[], body).await;
    assert_refused(&theirs, 400, "missing_header");

    let rows = rejections(&app, source).await;
    assert_eq!(rows.len(), 10, "the newest ten rows of 43 in the store");
    let missing = rows.iter().filter(|r| r.reason == "missing_header").count();
    assert_eq!(missing, 3, "the newest ones are kept");
    let (status, listed) = app
        .get(&format!("/api/v1/source/{source}/rejection?limit=250"))
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["data"].as_array().unwrap().len(), 10);
    assert_eq!(
        listed["data"][0]["reason"], "missing_header",
        "newest first"
    );

    let (status, counts) = app
        .get(&format!("/api/v1/source/{source}/rejection/counts"))
        .await;
    assert_eq!(status, 200, "{counts}");
    assert_eq!(counts["total"], 43, "{counts}");
    assert_eq!(counts["kept"], 10, "{counts}");
    let by_reason: Vec<(String, u64)> = counts["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["reason"].as_str().unwrap().to_owned(),
                c["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("missing_header".to_owned(), 3),
        ("signature_mismatch".to_owned(), 40),
    ];
    assert_eq!(by_reason, expected, "exact counts by reason");
    assert!(counts["data"][0]["firstAt"].is_string() && counts["data"][0]["lastAt"].is_string());

    assert_eq!(
        rejections(&app, other).await.len(),
        1,
        "another source is unaffected"
    );
    let (_, theirs) = app
        .get(&format!("/api/v1/source/{other}/rejection/counts"))
        .await;
    assert_eq!(theirs["total"], 1, "{theirs}");
    let (status, _) = app
        .get("/api/v1/source/src_01HZZZZZZZZZZZZZZZZZZZZZZZ/rejection/counts")
        .await;
    assert_eq!(status, 404);
}
