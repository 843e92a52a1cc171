//! Console sessions and app-portal tokens as rows.

use super::read::{Columns, FromColumns, Reader};
use crate::session::{Session, SessionScope};

impl FromColumns for Session {
    const COLUMNS: &'static str = "id_hash, kind, app_id, csrf, created_at, expires_at, read_only";

    fn read_from<C: Columns + ?Sized>(r: &mut Reader<'_, C>) -> Result<Self, C::Error> {
        let id_hash = r.text()?;
        let kind_at = r.at();
        let kind = r.text()?;
        let app_id = r.opt_parse()?;
        let scope = SessionScope::from_columns(&kind, app_id)
            .ok_or_else(|| r.corrupt(kind_at, format_args!("{kind:?} does not match app_id")))?;
        Ok(Session {
            id_hash,
            scope,
            csrf: r.text()?,
            created_at: r.time()?,
            expires_at: r.time()?,
            read_only: r.bool()?,
        })
    }
}
