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
