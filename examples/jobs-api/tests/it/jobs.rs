//! The behaviours of `POST /jobs`, each a function of a [`TestApp`] that `main.rs` runs on both
//! stores. Each asserts the durable rows (jobs and idempotency records), not only the answers.

use std::sync::Arc;

use reqwest::Response;
use serde_json::{json, Value};
use tokio::sync::Barrier;

use crate::app::TestApp;

const BODY: &str = r#"{"task":"resize","image":"a.png","width":640}"#;
const OTHER: &str = r#"{"task":"resize","image":"a.png","width":800,"crop":true}"#;

const REUSED: &str = "urn:vow:problem:idempotency-key-reused";
const IN_PROGRESS: &str = "urn:vow:problem:idempotency-key-in-progress";
const INVALID: &str = "urn:vow:problem:idempotency-key-invalid";
const EXPIRED: &str = "urn:vow:problem:idempotency-key-expired";
const UNAVAILABLE: &str = "urn:vow:problem:idempotency-store-unavailable";

/// What a test looks at in an answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    replayed: bool,
    retry_after: Option<String>,
    expires: Option<String>,
    content_type: Option<String>,
    body: Value,
}

async fn answer(response: Response) -> Answer {
    let header = |name: &str| {
        let value = response.headers().get(name)?;
        Some(value.to_str().unwrap().to_owned())
    };
    let (retry_after, expires) = (header("retry-after"), header("idempotency-expires"));
    let content_type = header("content-type");
    let replayed = match header("idempotent-replayed").as_deref() {
        None => false,
        Some("true") => true,
        Some(other) => panic!("Idempotent-Replayed: {other}"),
    };
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        replayed,
        retry_after,
        expires,
        content_type,
        body,
    }
}

async fn post(app: &TestApp, key: Option<&str>, body: &str) -> Answer {
    answer(app.send(key, body).await).await
}

fn job(n: u32) -> Value {
    json!({ "id": format!("job_{n}") })
}

pub async fn the_seed_scenario_answers_job_1_job_1_422_and_job_2(app: &TestApp) {
    let first = post(app, Some("k"), BODY).await;
    assert_eq!((first.status, &first.body), (202, &job(1)));
    let again = post(app, Some("k"), BODY).await;
    assert_eq!((again.status, &again.body), (202, &job(1)));
    let other = post(app, Some("k"), OTHER).await;
    assert_eq!(other.status, 422);
    let keyless = post(app, None, BODY).await;
    assert_eq!((keyless.status, &keyless.body), (202, &job(2)));

    assert_eq!(app.count("jobs").await, 2);
    assert_eq!(app.get_status("job_1").await, 200);
    assert_eq!(app.get_status("job_2").await, 200);
    assert_eq!(app.get_status("job_3").await, 404);
}

pub async fn a_replay_is_marked_and_says_when_the_key_expires(app: &TestApp) {
    let first = post(app, Some("order-1"), BODY).await;
    assert!(!first.replayed);
    // 24 h after the test clock's start (Tuesday, 1 January 2030).
    let expires = "Wed, 02 Jan 2030 00:00:00 GMT";
    assert_eq!(first.expires.as_deref(), Some(expires));
    app.advance(60);
    // The sf-string form of the same key is the same key.
    for key in ["order-1", "\"order-1\""] {
        let again = post(app, Some(key), BODY).await;
        assert_eq!((again.status, &again.body), (202, &job(1)));
        assert!(again.replayed, "{key}");
        assert_eq!(again.expires.as_deref(), Some(expires));
        assert_eq!(again.content_type.as_deref(), Some("application/json"));
    }
    assert_eq!(app.count("jobs").await, 1);
    assert_eq!(
        app.count("idempotency_records WHERE state = 'completed'")
            .await,
        1
    );
}

pub async fn the_same_key_with_another_body_is_422_with_the_differing_pointers_and_creates_nothing(
    app: &TestApp,
) {
    post(app, Some("k"), BODY).await;
    let reused = post(app, Some("k"), OTHER).await;
    assert_eq!(reused.status, 422);
    assert_eq!(
        reused.content_type.as_deref(),
        Some("application/problem+json")
    );
    assert_eq!(reused.body["type"], REUSED);
    let mut differences: Vec<_> = reused.body["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    differences.sort();
    assert_eq!(differences, ["/crop", "/width"]);
    assert!(!reused.replayed);
    assert_eq!(app.count("jobs").await, 1);
}

pub async fn without_a_key_every_post_is_a_new_job_and_no_record_is_kept(app: &TestApp) {
    for n in 1..=3 {
        let created = post(app, None, BODY).await;
        assert_eq!((created.status, &created.body), (202, &job(n)));
        assert_eq!((created.replayed, created.expires), (false, None));
    }
    assert_eq!(app.count("jobs").await, 3);
    assert_eq!(app.count("idempotency_records").await, 0);
}

pub async fn an_invalid_key_is_400_and_nothing_is_stored(app: &TestApp) {
    let long = "k".repeat(256);
    for key in ["", "a b", long.as_str(), "\"unterminated", "\"a\"b"] {
        let refused = post(app, Some(key), BODY).await;
        assert_eq!(refused.status, 400, "{key:?}");
        assert_eq!(refused.body["type"], INVALID, "{key:?}");
        assert_eq!(
            refused.content_type.as_deref(),
            Some("application/problem+json")
        );
    }
    let repeated = app
        .post(Some("k"), BODY)
        .header("idempotency-key", "k")
        .send()
        .await
        .unwrap();
    let repeated = answer(repeated).await;
    assert_eq!(
        (repeated.status, &repeated.body["type"]),
        (400, &json!(INVALID))
    );
    assert_eq!(app.count("jobs").await, 0);
    assert_eq!(app.count("idempotency_records").await, 0);
}

pub async fn a_body_that_is_not_a_json_object_is_400_and_nothing_is_stored(app: &TestApp) {
    for body in ["[1, 2]", "not json", ""] {
        let refused = post(app, Some("k"), body).await;
        assert_eq!(refused.status, 400, "{body:?}");
    }
    assert_eq!(app.count("jobs").await, 0);
    assert_eq!(app.count("idempotency_records").await, 0);
    // The key is still free.
    assert_eq!(post(app, Some("k"), BODY).await.body, job(1));
}

pub async fn a_key_in_progress_is_409_with_retry_after_and_creates_nothing(app: &TestApp) {
    app.claim("k", BODY).await;
    app.advance(10);
    let busy = post(app, Some("k"), BODY).await;
    assert_eq!(busy.status, 409);
    assert_eq!(busy.body["type"], IN_PROGRESS);
    assert_eq!(busy.retry_after.as_deref(), Some("20"));
    // Reusing the key for another request is refused even while the first runs.
    assert_eq!(post(app, Some("k"), OTHER).await.body["type"], REUSED);
    assert_eq!(app.count("jobs").await, 0);
}

/// 50 identical `POST /jobs` with one key, released together; the answers.
async fn fifty(app: &TestApp, prefer: Option<&str>) -> Vec<Answer> {
    let barrier = Arc::new(Barrier::new(50));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let mut request = app.post(Some("same"), BODY);
            if let Some(prefer) = prefer {
                request = request.header("prefer", prefer);
            }
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                answer(request.send().await.unwrap()).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

pub async fn fifty_concurrent_identical_posts_create_one_job_and_each_gets_it_or_a_409(
    app: &TestApp,
) {
    let answers = fifty(app, None).await;
    let mut first_hand = 0;
    for a in &answers {
        match a.status {
            202 => {
                assert_eq!(a.body, job(1));
                first_hand += usize::from(!a.replayed);
            }
            409 => {
                assert_eq!(a.body["type"], IN_PROGRESS);
                let secs: u64 = a.retry_after.as_deref().unwrap().parse().unwrap();
                assert!((1..=30).contains(&secs), "{secs}");
            }
            other => panic!("unexpected {other}: {a:?}"),
        }
    }
    assert_eq!(first_hand, 1, "exactly one request ran the create");
    assert_eq!(app.count("jobs").await, 1);
    assert_eq!(app.count("idempotency_records").await, 1);
}

pub async fn fifty_concurrent_identical_posts_that_prefer_to_wait_all_get_the_same_job(
    app: &TestApp,
) {
    let answers = fifty(app, Some("wait=5")).await;
    for a in &answers {
        assert_eq!((a.status, &a.body), (202, &job(1)), "{a:?}");
    }
    let first_hand = answers.iter().filter(|a| !a.replayed).count();
    assert_eq!(first_hand, 1, "exactly one request ran the create");
    assert_eq!(app.count("jobs").await, 1);
}

pub async fn a_write_that_fails_is_not_stored_and_the_retry_with_the_key_creates_the_job(
    app: &TestApp,
) {
    app.app.fail_next_writes(1);
    let failed = post(app, Some("k"), BODY).await;
    assert_eq!(failed.status, 503);
    assert_eq!(failed.expires, None);
    assert_eq!(app.count("jobs").await, 0, "the job row rolled back");
    assert_eq!(app.count("idempotency_records").await, 0, "released");

    let retried = post(app, Some("k"), BODY).await;
    assert_eq!((retried.status, &retried.body), (202, &job(1)));
    assert!(!retried.replayed, "the retry ran the create");
    assert_eq!(app.count("jobs").await, 1);
    assert_eq!(post(app, Some("k"), BODY).await.body, job(1));
    assert_eq!(app.count("jobs").await, 1);
}

pub async fn past_its_ttl_a_key_is_422_expired_and_never_creates_a_second_job(app: &TestApp) {
    post(app, Some("k"), BODY).await;
    app.advance(24 * 3600);
    for body in [BODY, OTHER] {
        let late = post(app, Some("k"), body).await;
        assert_eq!((late.status, &late.body["type"]), (422, &json!(EXPIRED)));
    }
    assert_eq!(app.count("jobs").await, 1);
}

pub async fn without_the_records_table_a_keyed_post_is_503_and_creates_nothing(app: &TestApp) {
    app.execute("DROP TABLE idempotency_records").await;
    let closed = post(app, Some("k"), BODY).await;
    assert_eq!(closed.status, 503);
    assert_eq!(closed.body["type"], UNAVAILABLE);
    assert_eq!(app.count("jobs").await, 0, "fails closed");
    // A request without a key needs no record.
    assert_eq!(post(app, None, BODY).await.body, job(1));
}
