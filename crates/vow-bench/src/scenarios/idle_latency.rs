//! `idle-latency`: how soon an idle vow delivers one message.
//!
//! Sends `--idle-count` messages (default 200) one at a time to one endpoint: post, wait until
//! the receiver has it, pause 20 ms so the workers are idle again, repeat. Reports the time
//! from the 2xx to the receiver's first byte (and from the POST). Target: p50 ≤ 5 ms.

use std::time::Duration;

use super::{Options, Rig};
use crate::api::PostOutcome;
use crate::ledger::{histogram, ms, Report};
use crate::load::LoadResult;

/// Pause between messages.
const PAUSE: Duration = Duration::from_millis(20);

/// Runs the sequential sends.
pub async fn run(opts: &Options) -> anyhow::Result<Vec<Report>> {
    let mut rig = Rig::start(opts, true, 1, &[]).await?;
    let mut load = LoadResult::new();
    let mut from_ack = histogram();
    let mut from_post = histogram();
    let mut before_ack = 0u64;
    let mut lost = 0u64;
    rig.begin_window();
    load.window_us.0 = rig.target.clock.now_us();
    for _ in 0..opts.idle_count {
        let (outcome, sent_us, ack_us) = rig.target.post_one().await;
        if let PostOutcome::Acked(id) = &outcome {
            let id = id.clone();
            let arrived = rig
                .receiver
                .wait_until(Duration::from_secs(10), |r| r.first_seen(0, &id).is_some())
                .await;
            match rig.receiver.first_seen(0, &id) {
                Some(at) if arrived => {
                    if at < ack_us {
                        before_ack += 1;
                    }
                    let _ = from_ack.record(at.saturating_sub(ack_us).max(1));
                    let _ = from_post.record(at.saturating_sub(sent_us).max(1));
                }
                _ => lost += 1,
            }
        }
        load.record(outcome, sent_us, ack_us);
        tokio::time::sleep(PAUSE).await;
    }
    load.window_us.1 = rig.target.clock.now_us();
    let cpu = rig.end_window();
    let closed = rig.close(&load, true, None).await?;

    let mut r = Report::new(format!(
        "idle-latency {} messages={} pause={}ms",
        opts.backend(),
        opts.idle_count,
        PAUSE.as_millis()
    ));
    let a = r.latency("ack_to_first_byte", &from_ack);
    r.line(a);
    let p = r.latency("post_to_first_byte", &from_post);
    r.line(p);
    let k = r.latency("ack", &load.ack_latency);
    r.line(k);
    r.line(format!(
        "{before_ack} deliveries began before the 2xx reached the client (counted as ~0 ms); {lost} not seen within 10 s"
    ));
    let p50 = ms(from_ack.value_at_quantile(0.5));
    r.line(format!(
        "target p50 <= 5 ms (2xx -> first byte): {}",
        if !from_ack.is_empty() && p50 <= 5.0 {
            "MET"
        } else {
            "MISSED"
        }
    ));
    closed.finish_report(&mut r, &cpu);
    Ok(vec![r])
}
