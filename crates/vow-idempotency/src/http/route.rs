//! What a keyed route is to the flow ([`Route`]): its name, the template its records are scoped
//! to, and the query parameters its handler reads, which are part of the request's identity. A
//! service keeps its own table of them; this module reads a request's target and query the one
//! way the fingerprint covers them.

/// A route that honours `Idempotency-Key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Its name, e.g. `message.create`.
    pub name: &'static str,
    /// Its template, e.g. `/api/v1/app/{app_id}/msg`: the records' scope.
    pub template: &'static str,
    /// The query parameters its handler reads (they change what it does or answers), e.g.
    /// `with_content`; any other parameter is ignored, by the handler and by the fingerprint.
    pub query: &'static [&'static str],
}

impl Route {
    /// Whether the template has the path parameter `param` (e.g. the application the records
    /// are scoped to).
    pub fn has_param(&self, param: &str) -> bool {
        self.template.contains(&format!("{{{param}}}"))
    }

    /// The query parameters the fingerprint covers, canonical: the ones the route reads, as
    /// sent (decoded, then percent-encoded again the one way `form_urlencoded` does), sorted by
    /// name (a repeated name keeps its values' order), joined by `&`. `with_content=true` and no
    /// parameter are two requests, though they answer alike: a retry sends what it sent.
    pub fn canonical_query(&self, raw: Option<&str>) -> String {
        let mut read: Vec<(String, String)> = form_urlencoded::parse(raw.unwrap_or("").as_bytes())
            .filter(|(name, _)| self.query.contains(&name.as_ref()))
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        read.sort_by(|a, b| a.0.cmp(&b.0));
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(read)
            .finish()
    }

    /// What the fingerprint covers besides the body and the query: the template with every
    /// parameter but `scoped` (already the record's scope, resolved, so e.g. an application's
    /// uid and id share keys) filled in from `params`. The same key sent to two resources is a
    /// reuse, never a replay of the other's.
    pub fn target<'a>(
        &self,
        scoped: &str,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> String {
        params
            .into_iter()
            .filter(|(name, _)| *name != scoped)
            .fold(self.template.to_owned(), |t, (name, value)| {
                t.replace(&format!("{{{name}}}"), value)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: Route = Route {
        name: "order.create",
        template: "/shops/{shop}/orders",
        query: &["dry_run", "expand"],
    };
    const REFUND: Route = Route {
        name: "order.refund",
        template: "/shops/{shop}/orders/{order}/lines/{line}/refund",
        query: &[],
    };

    #[test]
    fn a_route_knows_its_path_parameters() {
        assert!(REFUND.has_param("shop"));
        assert!(REFUND.has_param("line"));
        assert!(!REFUND.has_param("sho"));
        assert!(!ORDER.has_param("order"));
    }

    #[test]
    fn the_target_fills_in_every_parameter_but_the_scoped_one() {
        let params = [("shop", "s1"), ("order", "o/2"), ("line", "3")];
        assert_eq!(
            REFUND.target("shop", params),
            "/shops/{shop}/orders/o/2/lines/3/refund"
        );
        assert_eq!(
            REFUND.target("order", params),
            "/shops/s1/orders/{order}/lines/3/refund"
        );
        assert_eq!(ORDER.target("shop", [("shop", "s1")]), ORDER.template);
    }

    #[test]
    fn the_query_keeps_what_the_route_reads_sorted_and_encoded_one_way() {
        assert_eq!(ORDER.canonical_query(None), "");
        assert_eq!(ORDER.canonical_query(Some("page=2&sort=asc")), "");
        assert_eq!(
            ORDER.canonical_query(Some("expand=lines&page=2&dry_run=%74rue")),
            "dry_run=true&expand=lines"
        );
        assert_eq!(
            ORDER.canonical_query(Some("expand=b+c&dry_run=1&expand=a%2Cd")),
            "dry_run=1&expand=b+c&expand=a%2Cd"
        );
        assert_eq!(REFUND.canonical_query(Some("dry_run=1")), "");
    }
}
