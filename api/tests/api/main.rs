//! Integration tests of the REST API over a real store, on SQLite and on
//! MySQL (a fresh database per test; skipped or failed by the testkit policy
//! when MySQL is not reachable), and for the scenarios whose behaviour the
//! database could change, on PostgreSQL too.

mod admin_roles;
mod bad_input;
mod batch;
mod busy;
mod callbacks;
mod contract;
mod control;
mod every_route;
mod executions;
mod jobs;
mod limits;
mod ops;
mod oversize;
mod patch;
mod routing;
mod schedules;
mod security;
mod sensitive;
mod shards;
mod support;
mod tenants;
mod workflow_control;
mod workflows;

/// One `#[tokio::test]` per scenario and backend.
macro_rules! on_both_stores {
    ($($scenario:path => $name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let store = crate::support::store(crate::support::Backend::Sqlite).await.unwrap();
                    $scenario(crate::support::spawn_app(store).await).await;
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(store) = crate::support::store(crate::support::Backend::MySql).await else {
                        return;
                    };
                    $scenario(crate::support::spawn_app(store).await).await;
                }
            )*
        }
    };
}

/// One `#[tokio::test]` per scenario on SQLite, MySQL and PostgreSQL, in
/// module `$group`.
macro_rules! on_every_store {
    ($group:ident: $($scenario:path => $name:ident),* $(,)?) => {
        mod $group {
            on_both_stores! { $($scenario => $name),* }
            mod postgres {
                $(
                    #[tokio::test]
                    async fn $name() {
                        let Some((store, _db)) = crate::support::postgres_store().await else {
                            return;
                        };
                        $scenario(crate::support::spawn_app(store).await).await;
                    }
                )*
            }
        }
    };
}

on_every_store! { every_store:
    crate::security::batches_cost_a_token_per_job => batches_cost_a_token_per_job,
    crate::security::triggers_resumes_and_redeliveries_are_rate_limited => triggers_resumes_and_redeliveries_are_rate_limited,
    crate::security::unknown_keys_cost_one_read_per_prefix => unknown_keys_cost_one_read_per_prefix,
    crate::security::failed_authentications_are_limited_per_address => failed_authentications_are_limited_per_address,
    crate::security::a_revoke_evicts_the_key_here_at_once => a_revoke_evicts_the_key_here_at_once,
    crate::security::nul_is_refused_on_every_database => nul_is_refused_on_every_database,
}

on_every_store! { busy_jobs:
    crate::busy::a_busy_job_is_changed_at_the_version_just_read => a_busy_job_is_changed_at_the_version_just_read,
    crate::busy::jobs_show_their_last_result_and_health => jobs_show_their_last_result_and_health,
}

on_every_store! { fan_out:
    crate::shards::execution_modes_are_validated_shown_and_documented => execution_modes_are_validated_shown_and_documented,
}

on_both_stores! {
    crate::batch::batch_create_answers_each_item => batch_create_answers_each_item,
    crate::batch::batch_size_is_bounded => batch_size_is_bounded,
    crate::jobs::create_get_list_and_execution_shapes => create_get_list_and_execution_shapes,
    crate::jobs::idempotent_create_replays_and_conflicts => idempotent_create_replays_and_conflicts,
    crate::bad_input::bad_input_is_refused_and_changes_nothing => bad_input_is_refused_and_changes_nothing,
    crate::control::pause_resume_trigger_cancel => pause_resume_trigger_cancel,
    crate::callbacks::callbacks_are_listed_and_redelivered => callbacks_are_listed_and_redelivered,
    crate::callbacks::executions_without_callbacks_and_unknown_ones => executions_without_callbacks_and_unknown_ones,
    crate::ops::openapi_document_and_swagger_ui => openapi_document_and_swagger_ui,
    crate::ops::health_and_readiness => health_and_readiness,
    crate::ops::metrics_count_requests_by_route => metrics_count_requests_by_route,
    crate::ops::workers_are_listed => workers_are_listed,
    crate::ops::an_unreachable_database_is_503 => an_unreachable_database_is_503,
    crate::ops::serve_answers_on_a_socket_and_drains_on_shutdown => serve_answers_on_a_socket_and_drains_on_shutdown,
    crate::oversize::an_oversized_body_gets_its_413_at_any_pace => an_oversized_body_gets_its_413_at_any_pace,
    crate::schedules::recurring_jobs_show_their_schedule_fields => recurring_jobs_show_their_schedule_fields,
    crate::schedules::skipped_and_stop_requested_executions_are_visible => skipped_and_stop_requested_executions_are_visible,
    crate::schedules::openapi_documents_schedules_and_patch => openapi_documents_schedules_and_patch,
    crate::patch::patch_changes_a_job_at_its_version => patch_changes_a_job_at_its_version,
    crate::patch::bad_patches_change_nothing => bad_patches_change_nothing,
    crate::patch::patch_refuses_finished_and_fired_jobs_and_ends_closed_windows => patch_refuses_finished_and_fired_jobs_and_ends_closed_windows,
    crate::contract::every_route_answers_as_documented => every_route_answers_as_documented,
    crate::tenants::every_route_needs_a_usable_key => every_route_needs_a_usable_key,
    crate::tenants::expired_keys_are_refused => expired_keys_are_refused,
    crate::tenants::roles_decide_what_a_key_may_do => roles_decide_what_a_key_may_do,
    crate::tenants::a_revoked_key_stops_within_a_second => a_revoked_key_stops_within_a_second,
    crate::tenants::tenants_never_see_each_other => tenants_never_see_each_other,
    crate::tenants::admin_api_tenants_keys_and_audit => admin_api_tenants_keys_and_audit,
    crate::tenants::creates_are_rate_limited_per_key => creates_are_rate_limited_per_key,
    crate::routing::worker_groups_and_waiting_executions => worker_groups_and_waiting_executions,
    crate::routing::priorities_are_set_shown_changed_and_checked => priorities_are_set_shown_changed_and_checked,
    crate::routing::execution_logs_are_paged_and_progress_is_shown => execution_logs_are_paged_and_progress_is_shown,
}

on_every_store! { concurrency:
    crate::limits::max_concurrency_is_validated_and_shown => max_concurrency_is_validated_and_shown,
    crate::limits::operators_set_limits_and_held_work_shows_it => operators_set_limits_and_held_work_shows_it,
}

on_every_store! { sensitive_params:
    crate::sensitive::read_keys_never_see_sensitive_values => read_keys_never_see_sensitive_values,
    crate::sensitive::the_sensitive_names_are_configurable => the_sensitive_names_are_configurable,
    crate::every_route::read_keys_see_no_secret_on_any_get_route => read_keys_see_no_secret_on_any_get_route,
}

on_every_store! { workflow_routes:
    crate::workflows::workflows_are_created_validated_run_and_cancelled => workflows_are_created_validated_run_and_cancelled,
    crate::workflows::follow_ups_are_set_shown_and_checked => follow_ups_are_set_shown_and_checked,
    crate::workflows::workflow_nodes_count_against_the_live_jobs_cap => workflow_nodes_count_against_the_live_jobs_cap,
    crate::workflow_control::workflows_are_patched_paused_and_resumed => workflows_are_patched_paused_and_resumed,
    crate::workflow_control::workflow_schedules_take_job_policies => workflow_schedules_take_job_policies,
}

on_every_store! { listings:
    crate::executions::executions_are_filtered_across_jobs => executions_are_filtered_across_jobs,
}

on_every_store! { admin:
    crate::admin_roles::operator_only_routes => operator_only_routes,
    crate::admin_roles::callback_secret_by_role => callback_secret_by_role,
    crate::admin_roles::key_creation_by_role => key_creation_by_role,
    crate::admin_roles::key_listing_by_role => key_listing_by_role,
    crate::admin_roles::key_revocation_by_role => key_revocation_by_role,
    crate::admin_roles::audit_by_role => audit_by_role,
}
