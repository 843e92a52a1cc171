//! OpenAPI schemas for the wire types (behind the `utoipa` feature): what a prefixed id looks
//! like on the wire, for the `ToSchema` impls [`crate::id`] declares for every id type.

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// A prefixed id: `<prefix>_<ULID>`, with an example.
pub(crate) fn id_schema(prefix: &str, what: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(format!("The id of {what}.")))
        .pattern(Some(format!("^{prefix}_[0-9A-HJKMNP-TV-Z]{{26}}$")))
        .examples([format!("{prefix}_01HZY8XQ4M6V3R2K9T5N7B1C0D")])
        .into()
}
