//! The OpenAPI 3.1 document, generated from the code: every API handler carries its method, route
//! template, parameters and responses in one `#[utoipa::path]`, and [`OpenApiRouter`] builds both
//! the route and its entry in the document from it, so neither can drift from the other.
//!
//! What every operation shares is added here rather than repeated on each handler: the bearer
//! token (`HTTPBearer`, on the routes behind [`super::principal::authenticate`]) and the problem
//! responses any of them can give ([`HttpErrorOut`], and [`ValidationOut`] for a 422).
//! The document is served at `GET /api/v1/openapi.json` and rendered for people at `GET /docs`
//! ([`super::reference`]); both are built once, when the router is.

use axum::http::header;
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;

use crate::error::{HttpErrorOut, ValidationOut};
use crate::state::AppState;

/// Where the document is served.
pub const SPEC_PATH: &str = "/api/v1/openapi.json";
/// Where the API reference page is served.
pub const DOCS_PATH: &str = "/docs";

const BEARER: &str = "HTTPBearer";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "vow",
        description = "A self-hosted webhooks server with a Svix-compatible API: applications, \
                       endpoints, messages and their delivery attempts; inbound sources, their \
                       events and pull-mode consumption; the public ingest routes.",
    ),
    components(schemas(
        HttpErrorOut,
        ValidationOut,
        ServerSentEvent,
        crate::http::api::list::Ordering,
        crate::tail::wire::Failures,
        crate::tail::wire::Outcome,
    )),
    tags(
        (name = "Application"), (name = "Endpoint"), (name = "Message"),
        (name = "Message Attempt"), (name = "Event Type"), (name = "Authentication"),
        (name = "Idempotency"), (name = "Listen"), (name = "Source"), (name = "Source Event"),
        (name = "Source Pull"), (name = "Ingest", description = "Public: providers post here; \
                       each source verifies its provider's signature instead of a token."),
        (name = "Health"), (name = "Metrics"),
    )
)]
struct ApiDoc;

/// One event of a `text/event-stream` answer, as a client reads it: its name and its data (a
/// JSON document, as text).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // a schema only: the streams write their events as text
pub struct ServerSentEvent {
    /// The event's name (`ready`, `attempt`, ...); absent on a keep-alive.
    event: Option<String>,
    /// The event's data.
    data: String,
    /// The event's id, where the stream can be resumed from it.
    id: Option<String>,
}

/// An empty router whose document carries vow's title, shared schemas and tags.
pub fn base() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
}

/// Marks every operation of `routes` as needing the bearer token.
pub fn require_bearer(mut routes: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
    let requirement = SecurityRequirement::new(BEARER, Vec::<String>::new());
    for op in operations(routes.get_openapi_mut()) {
        op.security = Some(vec![requirement.clone()]);
    }
    routes
}

/// Completes the document: the bearer scheme, and on every operation the problem responses it
/// can give that its handler did not declare.
pub fn finish(mut doc: OpenApi) -> OpenApi {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    components
        .schemas
        .insert(PROBLEM.into(), idempotency_problem());
    for (status, description) in PROBLEMS {
        let schema = if *status == "422" {
            "HTTPValidationError"
        } else {
            "HttpErrorOut"
        };
        let mut response = ResponseBuilder::new().description(*description).content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name(schema)))
                .build(),
        );
        if matches!(*status, "400" | "409" | "422") {
            // What the `Idempotency-Key` of a keyed route answers with (RFC 9457).
            response = response.content(
                vow_idempotency::problem::CONTENT_TYPE,
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name(PROBLEM)))
                    .build(),
            );
        }
        let response = response.build();
        components
            .responses
            .insert(response_name(status), RefOr::T(response));
    }
    for op in operations(&mut doc) {
        let authenticated = op.security.is_some();
        for (status, _) in PROBLEMS {
            if !authenticated && matches!(*status, "401" | "403") {
                continue;
            }
            let reference = Ref::new(format!("#/components/responses/{}", response_name(status)));
            op.responses
                .responses
                .entry(status.to_string())
                .or_insert(RefOr::Ref(reference));
        }
    }
    doc
}

/// The problems any operation can answer with, by status.
const PROBLEMS: &[(&str, &str)] = &[
    (
        "400",
        "The request cannot be read (malformed JSON, a bad header).",
    ),
    ("401", "The bearer token is missing or wrong."),
    (
        "403",
        "The token does not reach this (another application's, or read-only).",
    ),
    ("404", "The named thing does not exist."),
    ("409", "The write clashes with existing state."),
    ("413", "The body is over the size limit."),
    ("415", "The body is not JSON."),
    (
        "422",
        "The input parsed but is not valid: every problem, by field.",
    ),
    (
        "500",
        "An internal error; the body names the request id to quote.",
    ),
    (
        "503",
        "The store is unavailable, or over its write capacity (code `overloaded`); nothing was \
         written: retry after `Retry-After`.",
    ),
];

const PROBLEM: &str = "IdempotencyProblem";

/// The RFC 9457 body of an `Idempotency-Key` problem (`vow_idempotency::Problem`).
fn idempotency_problem() -> RefOr<Schema> {
    let text = || ObjectBuilder::new().schema_type(Type::String);
    ObjectBuilder::new()
        .description(Some(
            "An Idempotency-Key problem: a missing key, one in flight, one reused with \
             another request.",
        ))
        .property("type", text())
        .property("title", text())
        .property("status", ObjectBuilder::new().schema_type(Type::Integer))
        .property("detail", text())
        .required("type")
        .required("title")
        .required("status")
        .required("detail")
        .into()
}

fn response_name(status: &str) -> String {
    format!("Problem{status}")
}

fn operations(doc: &mut OpenApi) -> impl Iterator<Item = &mut Operation> {
    doc.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
            &mut item.options,
            &mut item.trace,
        ]
        .into_iter()
        .filter_map(Option::as_mut)
    })
}

/// `GET /api/v1/openapi.json` and `GET /docs`, both rendered once from `doc`.
pub fn routes(doc: &OpenApi) -> Router<AppState> {
    let json = doc.to_pretty_json().unwrap_or_else(|e| {
        tracing::error!(error = %e, "the OpenAPI document does not serialize");
        "{}".into()
    });
    let json = bytes::Bytes::from(json);
    let page = Html(super::reference::render(doc));
    Router::new()
        .route(
            SPEC_PATH,
            get(move || {
                let json = json.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], json) }
            }),
        )
        .route(
            DOCS_PATH,
            get(move || {
                let page = page.clone();
                async move { page }
            }),
        )
}
