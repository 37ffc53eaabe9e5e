//! The templates the hot path reads, kept in process for a moment: a claim reads its
//! template's stock, limit and window on every call, and a second of staleness is what a
//! pause or an end of claims may take to reach every claim (`set_template_status` forgets
//! the entry at once in the process that changed it).

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use crate::domain::{ids::TemplateId, template::Template};

/// How long a cached template is trusted before it is read again (status changes by
/// another process become visible within this time).
const TTL: Duration = Duration::from_secs(1);

/// The cache, owned by the engine.
#[derive(Debug, Default)]
pub(super) struct TemplateCache {
    entries: RwLock<HashMap<TemplateId, (Instant, Arc<Template>)>>,
}

impl TemplateCache {
    /// The template, if it was read less than [`TTL`] ago.
    pub(super) fn fresh(&self, id: TemplateId) -> Option<Arc<Template>> {
        let cache = self.entries.read().ok()?;
        let (at, t) = cache.get(&id)?;
        (at.elapsed() < TTL).then(|| t.clone())
    }

    /// Keeps `template` as read now.
    pub(super) fn remember(&self, template: Template) -> Arc<Template> {
        let t = Arc::new(template);
        if let Ok(mut cache) = self.entries.write() {
            cache.insert(t.id, (Instant::now(), t.clone()));
        }
        t
    }

    /// Drops the entry of `id` (its status changed).
    pub(super) fn forget(&self, id: TemplateId) {
        if let Ok(mut cache) = self.entries.write() {
            cache.remove(&id);
        }
    }
}
