//! The console's actions (DESIGN.md section 23): POST forms that approve or deny a return,
//! pause or resume a buyer, retry a failed event, revoke a portal user. Each is taken only from the console's own
//! page (`Origin`), with the session's CSRF token (`crate::web`) and by an operator whose
//! role may (`operators::ConsoleAction::roles`); anyone else gets 403 with a page naming the
//! roles that may. The change is one writer job through `crate::audited`, which records it
//! in the audit log as `operator:<name>`; the answer is 303 back to the page.
//!
//! A new action is a variant of [`Action`] with its path, its `ConsoleAction` (which carries
//! the roles) and its job in [`run`].

use hyper::StatusCode;
use hyper::header::{HeaderValue, LOCATION};
use maud::html;

use super::session::{self, Session};
use super::{Console, layout};
use crate::audit::Actor;
use crate::db::DbError;
use crate::http::error::Error;
use crate::http::{Request, Response, response};
use crate::lifecycle::returns::Decision;
use crate::operators::ConsoleAction;

/// The largest action form accepted: a token and a note.
const FORM_LIMIT: usize = 16 * 1024;

/// One action on one object, by its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    ApproveReturn(String),
    DenyReturn(String),
    PauseBuyer(String),
    ResumeBuyer(String),
    RetryEvent(String),
    RevokePortalUser(String),
}

impl Action {
    /// The action a POST to `path` asks for: `/returns/{tx}/approve|deny`,
    /// `/buyers/{id}/pause|resume`, `/outbox/{event}/retry`, `/portal-users/{id}/revoke`.
    pub(super) fn of(path: &str) -> Option<Action> {
        let mut parts = path.strip_prefix('/')?.split('/');
        let (kind, id, verb) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || id.is_empty() {
            return None;
        }
        let id = id.to_string();
        Some(match (kind, verb) {
            ("returns", "approve") => Action::ApproveReturn(id),
            ("returns", "deny") => Action::DenyReturn(id),
            ("buyers", "pause") => Action::PauseBuyer(id),
            ("buyers", "resume") => Action::ResumeBuyer(id),
            ("outbox", "retry") => Action::RetryEvent(id),
            ("portal-users", "revoke") => Action::RevokePortalUser(id),
            _ => return None,
        })
    }

    fn kind(&self) -> ConsoleAction {
        match self {
            Action::ApproveReturn(_) | Action::DenyReturn(_) => ConsoleAction::DecideReturn,
            Action::PauseBuyer(_) | Action::ResumeBuyer(_) => ConsoleAction::PauseBuyer,
            Action::RetryEvent(_) => ConsoleAction::RetryEvent,
            Action::RevokePortalUser(_) => ConsoleAction::RevokePortalUser,
        }
    }

    /// The page the action's form is on, where the answer sends the browser back.
    fn page(&self) -> &'static str {
        match self {
            Action::ApproveReturn(_) | Action::DenyReturn(_) => "/returns",
            Action::PauseBuyer(_) | Action::ResumeBuyer(_) | Action::RevokePortalUser(_) => {
                "/buyers"
            }
            Action::RetryEvent(_) => "/outbox",
        }
    }
}

/// Takes `action` for `operator`: the checks in order (origin, CSRF token, role), then the
/// change.
pub(super) async fn post(
    console: &Console,
    request: Request,
    operator: &Session,
    action: Action,
) -> Result<Response, Error> {
    if !session::origin_allowed(console, &request, true) {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Ok(session::forbidden_origin());
    }
    let form = crate::web::read_form(request, FORM_LIMIT).await?;
    if !operator.csrf_valid(form.csrf()) {
        return Ok(refused(
            "The form's token is missing or is not this session's. Reload the page and try again.",
        ));
    }
    let kind = action.kind();
    if !operator.role.may(kind) {
        return Ok(forbidden_role(operator, kind));
    }
    let actor = Actor::Operator(operator.operator_name.clone());
    let note = form.get("note").map(str::to_string);
    let page = action.page();
    match run(console, actor, action, note).await? {
        Ok(()) => {
            let mut response = response::html(StatusCode::SEE_OTHER, String::new());
            response
                .headers_mut()
                .insert(LOCATION, HeaderValue::from_static(page));
            Ok(response)
        }
        Err(why) => Ok(response::html(
            StatusCode::CONFLICT,
            message_page("Not done", &why, page).into_string(),
        )),
    }
}

/// The change as one writer job of `crate::audited`: `Ok(Err(why))` when its owner refused
/// it.
async fn run(
    console: &Console,
    actor: Actor,
    action: Action,
    note: Option<String>,
) -> Result<Result<(), String>, DbError> {
    use crate::attempt::RetryError;
    use crate::audited::{
        decide_return_job, retry_event_job, revoke_portal_user_job, set_buyer_paused_job,
    };
    use crate::config::ConfigError;
    use crate::lifecycle::LifecycleError;
    use crate::partners::PartnerUserError;
    let (db, now) = (&console.db, crate::clock::now_ms());
    let lifecycle = |result: Result<_, LifecycleError>| match result {
        Ok(_) => Ok(Ok(())),
        Err(LifecycleError::Db(e)) => Err(e),
        Err(refused) => Ok(Err(refused.to_string())),
    };
    let config = |result: Result<_, ConfigError>| match result {
        Ok(_) => Ok(Ok(())),
        Err(ConfigError::Db(e)) => Err(e),
        Err(refused) => Ok(Err(refused.to_string())),
    };
    match action {
        Action::ApproveReturn(id) => {
            lifecycle(decide_return_job(db, actor, id.into(), Decision::Approve, note, now).await)
        }
        Action::DenyReturn(id) => {
            lifecycle(decide_return_job(db, actor, id.into(), Decision::Deny, note, now).await)
        }
        Action::PauseBuyer(id) => {
            config(set_buyer_paused_job(db, actor, id.into(), true, now).await)
        }
        Action::ResumeBuyer(id) => {
            config(set_buyer_paused_job(db, actor, id.into(), false, now).await)
        }
        Action::RetryEvent(id) => match retry_event_job(db, actor, id.into(), now).await {
            Ok(_) => Ok(Ok(())),
            Err(RetryError::Db(e)) => Err(e),
            Err(refused) => Ok(Err(refused.to_string())),
        },
        Action::RevokePortalUser(id) => match revoke_portal_user_job(db, actor, id, now).await {
            Ok(_) => Ok(Ok(())),
            Err(PartnerUserError::Db(e)) => Err(e),
            Err(refused) => Ok(Err(refused.to_string())),
        },
    }
}

/// 403 for a form without this session's CSRF token.
fn refused(why: &str) -> Response {
    response::html(
        StatusCode::FORBIDDEN,
        message_page("403 Forbidden", why, "/").into_string(),
    )
}

/// 403 for an operator whose role may not take `action`, naming the roles that may.
pub(super) fn forbidden_role(operator: &Session, action: ConsoleAction) -> Response {
    let roles: Vec<&str> = action.roles().iter().map(|r| r.as_str()).collect();
    let why = format!(
        "Only {} operators may {}; you are signed in as {} ({}).",
        roles.join(" and "),
        action.describe(),
        operator.operator_name,
        operator.role
    );
    response::html(
        StatusCode::FORBIDDEN,
        message_page("403 Forbidden", &why, "/").into_string(),
    )
}

fn message_page(title: &str, message: &str, back: &str) -> maud::Markup {
    layout::bare(
        title,
        html! {
            main class="error" {
                h1 { (title) }
                p { (message) }
                p { a href=(back) { "Back" } }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_matched_by_their_paths() {
        assert_eq!(
            Action::of("/returns/tx_1/approve"),
            Some(Action::ApproveReturn("tx_1".into()))
        );
        assert_eq!(
            Action::of("/outbox/evt_1/retry"),
            Some(Action::RetryEvent("evt_1".into()))
        );
        assert_eq!(
            Action::of("/portal-users/pu_1/revoke"),
            Some(Action::RevokePortalUser("pu_1".into()))
        );
        for none in [
            "/returns//approve",
            "/buyers/b/pause/x",
            "/buyers/b/delete",
            "/x",
        ] {
            assert_eq!(Action::of(none), None, "{none}");
        }
    }
}
