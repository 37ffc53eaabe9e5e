//! A template's life: created (its Redis keys initialised by a rebuild from zero coupons),
//! read through the short-lived cache (`template_cache.rs`) on the hot path, paused,
//! resumed or ended.

use std::sync::Arc;

use super::CouponEngine;
use crate::{
    domain::{
        ids::TemplateId,
        template::{NewTemplate, Template, TemplateStatus},
    },
    error::{EngineError, EngineResult},
    store::postgres,
};

impl CouponEngine {
    /// Creates a template in Postgres and initialises its Redis keys.
    pub async fn create_template(&self, spec: NewTemplate) -> EngineResult<Template> {
        spec.validate()?;
        let id = TemplateId::new_v7();
        let template = postgres::insert_template(&self.inner.pg, id, &spec).await?;
        self.inner.templates.remember(template.clone());
        // Initialisation is a rebuild from zero coupons: one code path, fenced like any other.
        self.rebuild(id).await?;
        Ok(template)
    }

    /// Loads a template (from a short-lived in-process cache on the hot path).
    pub async fn template(&self, id: TemplateId) -> EngineResult<Arc<Template>> {
        if let Some(t) = self.inner.templates.fresh(id) {
            return Ok(t);
        }
        let template = postgres::get_template(&self.inner.pg, id)
            .await?
            .ok_or(EngineError::NotFound("template"))?;
        Ok(self.inner.templates.remember(template))
    }

    /// Remaining stock in Redis (None if the keys are absent).
    pub async fn remaining_stock(&self, template: TemplateId) -> EngineResult<Option<i64>> {
        Ok(self.inner.redis.stock(template).await?)
    }

    /// Pauses, resumes or ends claims on a template.
    pub async fn set_template_status(
        &self,
        id: TemplateId,
        status: TemplateStatus,
    ) -> EngineResult<()> {
        if !postgres::set_template_status(&self.inner.pg, id, status).await? {
            return Err(EngineError::NotFound("template"));
        }
        self.inner.templates.forget(id);
        Ok(())
    }
}
