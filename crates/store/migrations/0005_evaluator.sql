-- leadrelay schema: the evaluator learns from buyers' outcomes (DESIGN.md section 17).

-- Every set of weights a workspace has scored leads with, numbered from 1 per workspace;
-- the highest version is the one in use (`workspaces.evaluator_weights` holds the same
-- weights, read by ingest). Written only by `autodelivery::weights`, in the same writer
-- job as the column.
CREATE TABLE evaluator_versions (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    version      INTEGER NOT NULL CHECK (version >= 1),
    -- JSON object of weights; NULL for the built-in defaults.
    weights      TEXT,
    -- How they came to be: `initial` (what the workspace had before its first change),
    -- `set`, `reset`, `train` (`evaluator train --apply`), `restore` (`set --version`).
    origin       TEXT NOT NULL
                 CHECK (origin IN ('initial', 'set', 'reset', 'train', 'restore')),
    -- JSON: for `train` the rows and holdout figures, for `restore` the version restored.
    detail       TEXT,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, version)
) WITHOUT ROWID;

-- The features each delivered lead request was scored with, as the evaluator computed them
-- when it decided (so a later change of the feature code does not move old rows): what
-- `evaluator train` learns from, joined to the request's transactions and their outcomes.
-- Written by `autodelivery::stored_features` in the ingest writer job, only for requests
-- that got a transaction. The encoding is described there.
CREATE TABLE evaluation_features (
    lead_request_id TEXT PRIMARY KEY REFERENCES lead_requests(id),
    -- The lead's container, for its threshold (the leads table is wide to read).
    container_id    TEXT NOT NULL REFERENCES containers(id),
    features        TEXT NOT NULL
) WITHOUT ROWID;
