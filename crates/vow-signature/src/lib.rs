//! Pure webhook signing and verification for vow: no IO, no panics on any
//! input, constant-time comparisons, and errors that never echo secrets.
//!
//! Three families of schemes are supported:
//!
//! * **Standard Webhooks** — `v1` (HMAC-SHA256 with `whsec_` keys) and `v1a`
//!   (ed25519 with `whsk_`/`whpk_` keys), signed over
//!   `msg_id.timestamp.payload` and carried in `webhook-id`,
//!   `webhook-timestamp` and `webhook-signature`. Sign with several keys at
//!   once for rotation ([`sign`]); verify with [`Verifier`].
//! * **Seed styles** — the `x-signature` formats of vow's seed senders,
//!   keyed with the secret *text as configured* ([`seed`]).
//! * **Inbound providers** — verifying what Stripe, GitHub, Shopify, Slack,
//!   Square, Paddle, Linear, Twilio, Discord, Standard Webhooks senders, the
//!   seed styles or a configured generic HMAC send, with rotation, an
//!   injected clock and errors classed 400/401/500 ([`provider`]).
//!
//! ```
//! use vow_signature::{sign, SigningKey, Verifier, WebhookHeaders};
//!
//! let key: SigningKey = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".parse()?;
//! let body = br#"{"email":"test@example.com","username":"test_user"}"#;
//! let signature = sign(&[key.clone()], "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553, body);
//! assert_eq!(signature, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
//!
//! let headers = WebhookHeaders::new(
//!     Some(b"msg_27UH4WbU6Z5A5EzD8u03UvzRbpk"),
//!     Some(b"1649367553"),
//!     Some(signature.as_bytes()),
//! );
//! Verifier::new([key.verifying_key()]).verify_at(&headers, body, 1649367553)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! * [`error`] — [`Error`] (with its HTTP class, [`ErrorKind`]) and [`KeyError`].
//! * [`header`] — header names, [`WebhookHeaders`], timestamp and entry parsers.
//! * [`key`] — [`SigningKey`] / [`VerifyingKey`] (prefix-dispatching enums).
//! * [`symmetric`] — [`SymmetricKey`] (`whsec_`) and the HMAC helpers
//!   (SHA-256, and SHA-1/SHA-512 for providers).
//! * [`asymmetric`] — [`AsymmetricKey`] (`whsk_`) and [`PublicKey`] (`whpk_`).
//! * [`standard`] — signed content, [`sign`], [`Verifier`].
//! * [`seed`] — [`seed::sha256`] (seed 000) and [`seed::timestamped`] (seed 003).
//! * [`provider`] — inbound verification: [`provider::Scheme`],
//!   [`provider::Request`], [`provider::verify`], [`provider::Verified`];
//!   one file per family: `pairs` (Stripe, Paddle, seed 003), `hmac` (generic
//!   HMAC and its GitHub, Shopify, Slack, Square instances) with its
//!   `template`, `linear`, `twilio`, `discord`, `standard_webhooks`.

pub mod asymmetric;
pub mod error;
pub mod header;
pub mod key;
pub mod provider;
pub mod seed;
pub mod standard;
pub mod symmetric;

pub use asymmetric::{AsymmetricKey, PublicKey};
pub use error::{Error, ErrorKind, KeyError};
pub use header::WebhookHeaders;
pub use key::{SigningKey, VerifyingKey};
pub use standard::{sign, signed_content, Verifier, DEFAULT_TOLERANCE_SECS};
pub use symmetric::SymmetricKey;
