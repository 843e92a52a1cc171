//! `vow demo` as a test: seed 000's six scenarios end in the states the seed describes.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_saves_exactly_the_deliveries_the_seed_saves() {
    let t = vow_server::demo::run().await.unwrap();
    let text = t.lines.join("\n");
    assert_eq!(
        t.saved.len(),
        2,
        "scenarios 1 and 4 are saved, once each:\n{text}"
    );
    assert!(
        text.contains("already handled -> 200, not processed again"),
        "{text}"
    );
    assert!(text.contains("bad signature -> 401"), "{text}");
    assert_eq!(
        text.matches("simulated outage -> 500").count(),
        2 + 3,
        "{text}"
    );
    assert!(
        text.contains("result: dead-lettered after 3 attempts"),
        "{text}"
    );
    assert!(text.contains("result: delivered, attempt 3"), "{text}");
    assert!(
        text.contains(": 409"),
        "a repeated eventId is refused:\n{text}"
    );
    assert!(text.ends_with(&format!("Saved deliveries: {}", t.saved.join(", "))));
}
