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
    // Scenario 1 is one attempt, and says so once.
    let first = scenario(&text, "1. A normal delivery");
    assert_eq!(first.matches("sender:").count(), 1, "{first}");
    assert_eq!(first.matches("receiver:").count(), 1, "{first}");
    // Every attempt printed is one the receiver saw.
    assert_eq!(
        text.matches("  sender: ").count(),
        text.matches("  receiver: ").count(),
        "{text}"
    );

    // Scenario 6 is seed 000's Idempotency-Key rule, as the API answered it.
    let sixth: Vec<&str> = scenario(&text, "6. Idempotency key on the API")
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .take(4)
        .collect();
    let id = |line: &str| line.split('"').nth(3).map(str::to_owned);
    assert!(
        sixth[0].ends_with(&format!("202 {{\"id\":\"{}\"}}", id(sixth[0]).unwrap())),
        "{text}"
    );
    assert!(sixth[1].contains("same key, same body"), "{text}");
    assert!(sixth[1].ends_with("(Idempotent-Replayed: true)"), "{text}");
    assert_eq!(
        id(sixth[1]),
        id(sixth[0]),
        "the replay is the first response"
    );
    assert!(
        sixth[2].ends_with("422 urn:vow:problem:idempotency-key-reused"),
        "{text}"
    );
    assert!(
        sixth[3].contains("no key") && sixth[3].contains(": 202 "),
        "{text}"
    );
    assert!(
        id(sixth[3]).is_some() && id(sixth[3]) != id(sixth[0]),
        "a new message: {text}"
    );
    assert!(!text.contains("Idempotency-Key comes next"), "{text}");
    assert!(text.ends_with(&format!("Saved deliveries: {}", t.saved.join(", "))));
}

/// The lines of the scenario whose heading is `heading`, up to the next blank line.
fn scenario<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?}:\n{text}"));
    let rest = &text[start..];
    rest.find("\n\n").map_or(rest, |end| &rest[..end])
}
