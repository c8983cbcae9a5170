"""Every session-state and widget key the app uses, in one place."""

SELECTED_RUNS = "selected_runs"          # list[str] of run keys chosen on the Runs page
REVIEWER = "reviewer"                    # the reviewer's name (required to label)
BLIND = "blind_mode"                     # hide other reviewers' labels until you label
REVIEW_CURRENT = "review_current"         # trajectory id shown in the review queue
QUEUE_FILTER = "review_queue_filter"     # which Inconclusive traces the queue shows
REVIEW_RUN = "review_run"                # run key being reviewed
REVIEW_NOTE = "review_note"              # optional note typed before labelling
LAST_ACTION = "review_last_action"       # message shown after a label / undo
TRAJ_TABLE = "trajectory_table"          # the dataframe selection on the Trajectories page
TRAJ_RUN = "trajectory_run"
UPLOAD = "upload_file"
IMPORT_PATH = "import_path"
IDENTITY = "signed_in_identity"         # the OIDC user (None without auth); fixes REVIEWER
IMPORT_REPORT = "last_import_report"     # ((kind, message), rejected rows) shown after the rerun
PENDING_SELECT = "pending_run_selection" # run keys to add to SELECTED_RUNS before the picker is drawn
RECLASSIFIER = "import_reclassifier"      # re-classifier of record spec used by imports
