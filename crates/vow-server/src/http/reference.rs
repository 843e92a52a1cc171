//! The API reference page (`GET /docs`): the OpenAPI document rendered on the server into one
//! self-contained HTML page (its style and its search script are inline: nothing is fetched, at
//! build time or at run time). Operations are grouped by tag, each with its method and path,
//! parameters, request body, responses and an anchor; the schemas follow with their fields.

use askama::Template;
use serde_json::{Map, Value};
use utoipa::openapi::OpenApi;

/// The page, rendered from `doc`.
pub fn render(doc: &OpenApi) -> String {
    let doc = serde_json::to_value(doc).unwrap_or_default();
    let page = ReferencePage {
        title: text(&doc["info"]["title"]),
        version: text(&doc["info"]["version"]),
        description: text(&doc["info"]["description"]),
        groups: groups(&doc),
        schemas: schemas(&doc),
    };
    page.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "the API reference page does not render");
        String::new()
    })
}

#[derive(Template)]
#[template(path = "reference/page.html")]
struct ReferencePage {
    title: String,
    version: String,
    description: String,
    groups: Vec<Group>,
    schemas: Vec<SchemaView>,
}

/// The operations of one tag.
struct Group {
    tag: String,
    operations: Vec<OperationView>,
}

struct OperationView {
    anchor: String,
    method: String,
    path: String,
    summary: String,
    description: String,
    authenticated: bool,
    parameters: Vec<Field>,
    request: Option<Body>,
    responses: Vec<ResponseView>,
}

/// A request or response body: its type, and the fields of the schema it names.
struct Body {
    media: String,
    ty: String,
    schema: Option<String>,
    fields: Vec<Field>,
}

struct ResponseView {
    status: String,
    description: String,
    body: Option<Body>,
}

/// A parameter or a schema property.
struct Field {
    name: String,
    place: String,
    ty: String,
    required: bool,
    description: String,
}

struct SchemaView {
    name: String,
    ty: String,
    description: String,
    fields: Vec<Field>,
}

const METHODS: [&str; 6] = ["get", "post", "put", "patch", "delete", "head"];

fn groups(doc: &Value) -> Vec<Group> {
    let mut groups: Vec<Group> = doc["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| Group {
            tag: text(&t["name"]),
            operations: Vec::new(),
        })
        .collect();
    for (path, item) in object(&doc["paths"]) {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let tag = op["tags"][0].as_str().unwrap_or("Other").to_string();
            let view = operation(doc, path, method, op);
            match groups.iter_mut().find(|g| g.tag == tag) {
                Some(g) => g.operations.push(view),
                None => groups.push(Group {
                    tag,
                    operations: vec![view],
                }),
            }
        }
    }
    groups.retain(|g| !g.operations.is_empty());
    groups
}

fn operation(doc: &Value, path: &str, method: &str, op: &Value) -> OperationView {
    let id = op["operationId"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("{method}-{path}"));
    let parameters = op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| Field {
            name: text(&p["name"]),
            place: text(&p["in"]),
            ty: type_of(&p["schema"]),
            required: p["required"].as_bool().unwrap_or(false),
            description: text(&p["description"]),
        })
        .collect();
    let request = body(doc, &op["requestBody"]["content"]);
    let responses = object(&op["responses"])
        .map(|(status, r)| {
            let r = resolve(doc, r);
            ResponseView {
                status: status.clone(),
                description: text(&r["description"]),
                body: body(doc, &r["content"]),
            }
        })
        .collect();
    OperationView {
        anchor: anchor(&id),
        method: method.to_uppercase(),
        path: path.to_string(),
        summary: text(&op["summary"]),
        description: text(&op["description"]),
        authenticated: op.get("security").is_some(),
        parameters,
        request,
        responses,
    }
}

fn body(doc: &Value, content: &Value) -> Option<Body> {
    let (media, c) = object(content).next()?;
    let schema = &c["schema"];
    let name = schema["$ref"].as_str().map(ref_name);
    let fields = match &name {
        Some(n) => fields(&doc["components"]["schemas"][n]),
        None => fields(schema),
    };
    Some(Body {
        media: media.clone(),
        ty: type_of(schema),
        schema: name.map(str::to_string),
        fields,
    })
}

fn schemas(doc: &Value) -> Vec<SchemaView> {
    object(&doc["components"]["schemas"])
        .map(|(name, s)| SchemaView {
            name: name.clone(),
            ty: type_of(s),
            description: text(&s["description"]),
            fields: fields(s),
        })
        .collect()
}

fn fields(schema: &Value) -> Vec<Field> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    object(&schema["properties"])
        .map(|(name, p)| Field {
            name: name.clone(),
            place: String::new(),
            ty: type_of(p),
            required: required.contains(&name.as_str()),
            description: text(&p["description"]),
        })
        .collect()
}

/// A schema's type in a few words: `string`, `ApplicationOut`, `array of EndpointOut`,
/// `integer | null`.
fn type_of(s: &Value) -> String {
    if let Some(r) = s["$ref"].as_str() {
        return ref_name(r).to_string();
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(list) = s[key].as_array() {
            return list.iter().map(type_of).collect::<Vec<_>>().join(" | ");
        }
    }
    let base = match &s["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts.iter().map(text).collect::<Vec<_>>().join(" | "),
        _ => "any".to_string(),
    };
    if let Some(values) = s["enum"].as_array() {
        let values: Vec<String> = values.iter().map(Value::to_string).collect();
        return format!("{base}: {}", values.join(", "));
    }
    if base.starts_with("array") {
        return base.replacen("array", &format!("array of {}", type_of(&s["items"])), 1);
    }
    match s["format"].as_str() {
        Some(f) => format!("{base} ({f})"),
        None => base,
    }
}

fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str().and_then(|r| r.strip_prefix("#/")) {
        Some(path) => path.split('/').fold(doc, |at, part| &at[part]),
        None => v,
    }
}

fn ref_name(r: &str) -> &str {
    r.rsplit('/').next().unwrap_or(r)
}

fn object(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flat_map(Map::iter)
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn anchor(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}
