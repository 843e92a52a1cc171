//! Server-sent events read from a byte stream that arrives in arbitrary chunks: an event is the
//! `event:` and `data:` lines up to a blank line; comments (`:` lines, vow's keep-alives) are
//! skipped.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its `event:` name (`message` when it has none).
    pub name: String,
    /// Its `data:` lines, joined by newlines.
    pub data: String,
}

/// Collects chunks and hands out the events they complete.
#[derive(Debug, Default)]
pub struct Reader {
    buffer: Vec<u8>,
}

impl Reader {
    /// Adds `chunk`; returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
            if let Some(event) = parse(&String::from_utf8_lossy(&block)) {
                events.push(event);
            }
        }
        events
    }
}

/// The event of one block, or `None` for a block of comments only.
fn parse(block: &str) -> Option<Event> {
    let mut name = None;
    let mut data: Option<String> = None;
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => name = Some(value.to_string()),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            _ => {}
        }
    }
    if name.is_none() && data.is_none() {
        return None;
    }
    Some(Event {
        name: name.unwrap_or_else(|| "message".into()),
        data: data.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_come_out_whole_and_comments_are_skipped() {
        let mut r = Reader::default();
        assert!(r.push(b"event: ready\ndata: ep_1").is_empty());
        let got = r.push(b"\n\n:\n\nevent: delivery\ndata: {\"a\":1}\n\ndata: x\ndata: y\n\n");
        assert_eq!(
            got,
            vec![
                Event {
                    name: "ready".into(),
                    data: "ep_1".into()
                },
                Event {
                    name: "delivery".into(),
                    data: "{\"a\":1}".into()
                },
                Event {
                    name: "message".into(),
                    data: "x\ny".into()
                },
            ]
        );
    }
}
