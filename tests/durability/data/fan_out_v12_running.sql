BEGIN TRANSACTION;
CREATE TABLE approvals (
            approval_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            root_run_id TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'allowed', 'denied')),
            asked_at REAL NOT NULL,
            approval TEXT NOT NULL
        );
CREATE TABLE checkpoint_deltas (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            delta TEXT NOT NULL
        );
CREATE TABLE checkpoints (
        run_id TEXT PRIMARY KEY,
        step INTEGER NOT NULL,
        ts REAL NOT NULL,
        checkpoint TEXT NOT NULL
    );
INSERT INTO "checkpoints" VALUES('r1a2219669b030589051d9',1,1.79585983531531262393e+09,'{"run_id":"r1a2219669b030589051d9","step":1,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_lead_0_0_01c2cd9c","name":"fan_out","input":{"strategy":"merge","runs":[{"agent":"worker","task":"A"},{"agent":"worker","task":"B"}]}}]}],"answered":[],"started":[],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":0},"ts":1795859835.3153126}');
CREATE TABLE "commands" (
            command_id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL CHECK (kind IN ('stop', 'send', 'approval')),
            run_id TEXT NOT NULL,
            content TEXT,
            ts REAL NOT NULL,
            taken_at REAL
        );
CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        ts REAL NOT NULL,
        event TEXT NOT NULL
    );
INSERT INTO "events" VALUES(1,'r1a2219669b030589051d9','spawned',1.79585983531268835065e+09,'{"kind":"spawned","run_id":"r1a2219669b030589051d9","agent":"lead","root_run_id":"r1a2219669b030589051d9","parent_run_id":null,"depth":0,"ts":1795859835.3126884,"data":{"task":"go","background":false}}');
INSERT INTO "events" VALUES(2,'r1a2219669b030589051d9','started',1.79585983531278514865e+09,'{"kind":"started","run_id":"r1a2219669b030589051d9","agent":"lead","root_run_id":"r1a2219669b030589051d9","parent_run_id":null,"depth":0,"ts":1795859835.3127851,"data":{"model":"sonnet","resumed":false}}');
INSERT INTO "events" VALUES(3,'r1a2219669b030589051d9','step',1.79585983531541776661e+09,'{"kind":"step","run_id":"r1a2219669b030589051d9","agent":"lead","root_run_id":"r1a2219669b030589051d9","parent_run_id":null,"depth":0,"ts":1795859835.3154178,"data":{"step":1,"input_tokens":23,"output_tokens":24}}');
INSERT INTO "events" VALUES(4,'r1a2219669b030589051d9','tool_call',1.79585983531622862818e+09,'{"kind":"tool_call","run_id":"r1a2219669b030589051d9","agent":"lead","root_run_id":"r1a2219669b030589051d9","parent_run_id":null,"depth":0,"ts":1795859835.3162286,"data":{"tool":"fan_out","input":{"strategy":"merge","runs":[{"agent":"worker","task":"A"},{"agent":"worker","task":"B"}]}}}');
INSERT INTO "events" VALUES(5,'r1a2219669b40dbda7449a','spawned',1.79585983531659793858e+09,'{"kind":"spawned","run_id":"r1a2219669b40dbda7449a","agent":"worker","root_run_id":"r1a2219669b030589051d9","parent_run_id":"r1a2219669b030589051d9","depth":1,"ts":1795859835.316598,"data":{"task":"A","background":false}}');
INSERT INTO "events" VALUES(6,'r1a2219669b40dbda7449a','started',1.79585983531672477723e+09,'{"kind":"started","run_id":"r1a2219669b40dbda7449a","agent":"worker","root_run_id":"r1a2219669b030589051d9","parent_run_id":"r1a2219669b030589051d9","depth":1,"ts":1795859835.3167248,"data":{"model":"sonnet","resumed":false}}');
INSERT INTO "events" VALUES(7,'r1a2219669b4397b8a82b5','spawned',1.79585983531676411629e+09,'{"kind":"spawned","run_id":"r1a2219669b4397b8a82b5","agent":"worker","root_run_id":"r1a2219669b030589051d9","parent_run_id":"r1a2219669b030589051d9","depth":1,"ts":1795859835.316764,"data":{"task":"B","background":false}}');
INSERT INTO "events" VALUES(8,'r1a2219669b4397b8a82b5','started',1.79585983531680917733e+09,'{"kind":"started","run_id":"r1a2219669b4397b8a82b5","agent":"worker","root_run_id":"r1a2219669b030589051d9","parent_run_id":"r1a2219669b030589051d9","depth":1,"ts":1795859835.3168092,"data":{"model":"sonnet","resumed":false}}');
CREATE TABLE journal (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            entries TEXT NOT NULL
        );
CREATE TABLE leases (
            owner TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            renewed_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            lease TEXT NOT NULL
        , epoch INTEGER);
INSERT INTO "leases" VALUES('vm:29521:91286677','vm',29521,1.79585983531095886231e+09,1.79585985031095886235e+09,'{"owner":"vm:29521:91286677","host":"vm","pid":29521,"machine":"vm|fb18aecd-afe8-4049-b9da-e861b5001147|pid:[4026531836]","started_at":1795859835.3109303,"renewed_at":1795859835.3109589,"expires_at":1795859850.3109589,"expires_boot":65987.435247541,"epoch":1}',1);
CREATE TABLE "mail" (
        seq INTEGER PRIMARY KEY,
        mail_id TEXT NOT NULL UNIQUE,
        sender TEXT NOT NULL,
        recipient TEXT NOT NULL,
        state TEXT NOT NULL,
        sent_at REAL NOT NULL,
        mail TEXT NOT NULL,
        journal TEXT,
        journal_after INTEGER,
        receipt TEXT
    );
CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
INSERT INTO "meta" VALUES('application','subagents');
INSERT INTO "meta" VALUES('schema_version','12');
INSERT INTO "meta" VALUES('lease_epoch','1');
CREATE TABLE outcomes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE,
        status TEXT NOT NULL,
        delivered INTEGER NOT NULL DEFAULT 0 CHECK (delivered IN (0, 1)),
        outcome TEXT NOT NULL
    );
CREATE TABLE previews (run_id TEXT PRIMARY KEY, preview TEXT NOT NULL);
CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        status TEXT NOT NULL,
        root_run_id TEXT NOT NULL,
        parent_run_id TEXT,
        depth INTEGER NOT NULL,
        created_at REAL NOT NULL,
        ended_at REAL,
        record TEXT NOT NULL
    , archived_at REAL, cleanup TEXT CHECK (cleanup IN ('keep', 'delete')), restarts INTEGER NOT NULL DEFAULT 0, retries INTEGER NOT NULL DEFAULT 0);
INSERT INTO "runs" VALUES('r1a2219669b030589051d9','lead','running','r1a2219669b030589051d9',NULL,0,1.79585983531268835065e+09,NULL,'{"run_id":"r1a2219669b030589051d9","agent":"lead","task":"go","root_run_id":"r1a2219669b030589051d9","parent_run_id":null,"depth":0,"context":null,"label":null,"model":"sonnet","status":"running","background":false,"created_at":1795859835.3126884,"started_at":1795859835.3127851,"ended_at":null,"deadline_s":300.0,"outcome":null,"usage":{"input_tokens":23,"output_tokens":24,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"tool_calls":1,"restarts":0,"cleanup":"keep","request_id":"r1a2219669b030589051d9","owner":"vm:29521:91286677","node":null,"token_budget":null,"cost_budget_usd":null,"on_failure":"report","retries":0,"shared":{},"ceiling":[{"agent":"runtime","run_id":"vm:29521:91286677","mode":"default"}],"continues":null,"approvals_in_store":false,"detached":false,"answered_by":"scripted"}',NULL,'keep',0,0);
INSERT INTO "runs" VALUES('r1a2219669b40dbda7449a','worker','running','r1a2219669b030589051d9','r1a2219669b030589051d9',1,1.79585983531659793858e+09,NULL,'{"run_id":"r1a2219669b40dbda7449a","agent":"worker","task":"A","root_run_id":"r1a2219669b030589051d9","parent_run_id":"r1a2219669b030589051d9","depth":1,"context":null,"label":null,"model":"sonnet","status":"running","background":false,"created_at":1795859835.316598,"started_at":1795859835.3167248,"ended_at":null,"deadline_s":300.0,"outcome":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":0},"steps":0,"tool_calls":0,"restarts":0,"cleanup":"keep","request_id":"toolu_lead_0_0_01c2cd9c#fan0","owner":"vm:29521:91286677","node":null,"token_budget":null,"cost_budget_usd":null,"on_failure":"report","retries":0,"shared":{},"ceiling":[{"agent":"runtime","run_id":"vm:29521:91286677","mode":"default"},{"agent":"lead","run_id":"r1a2219669b030589051d9"}],"continues":null,"approvals_in_store":false,"detached":false,"answered_by":"scripted"}',NULL,'keep',0,0);
INSERT INTO "runs" VALUES('r1a2219669b4397b8a82b5','worker','running','r1a2219669b030589051d9','r1a2219669b030589051d9',1,1.79585983531676411629e+09,NULL,'{"run_id":"r1a2219669b4397b8a82b5","agent":"worker","task":"B","root_run_id":"r1a2219669b030589051d9","parent_run_id":"r1a2219669b030589051d9","depth":1,"context":null,"label":null,"model":"sonnet","status":"running","background":false,"created_at":1795859835.316764,"started_at":1795859835.3168092,"ended_at":null,"deadline_s":300.0,"outcome":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":0},"steps":0,"tool_calls":0,"restarts":0,"cleanup":"keep","request_id":"toolu_lead_0_0_01c2cd9c#fan1","owner":"vm:29521:91286677","node":null,"token_budget":null,"cost_budget_usd":null,"on_failure":"report","retries":0,"shared":{},"ceiling":[{"agent":"runtime","run_id":"vm:29521:91286677","mode":"default"},{"agent":"lead","run_id":"r1a2219669b030589051d9"}],"continues":null,"approvals_in_store":false,"detached":false,"answered_by":"scripted"}',NULL,'keep',0,0);
CREATE TABLE subscriptions (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            root_run_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            UNIQUE (run_id, topic)
        );
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_root ON runs (root_run_id);
CREATE INDEX runs_parent ON runs (parent_run_id);
CREATE INDEX runs_agent ON runs (agent);
CREATE INDEX runs_created ON runs (created_at, run_id);
CREATE INDEX events_run ON events (run_id, seq);
CREATE INDEX outcomes_undelivered ON outcomes (seq) WHERE delivered = 0;
CREATE INDEX runs_sweep ON runs (archived_at, ended_at);
CREATE INDEX journal_run ON journal (run_id, seq);
CREATE INDEX checkpoint_deltas_run ON checkpoint_deltas (run_id, seq);
CREATE INDEX approvals_pending ON approvals (asked_at) WHERE status = 'pending';
CREATE INDEX approvals_root ON approvals (root_run_id);
CREATE INDEX approvals_run ON approvals (run_id);
CREATE INDEX commands_pending ON commands (command_id) WHERE taken_at IS NULL;
CREATE TRIGGER leases_epoch_on_insert AFTER INSERT ON leases
    WHEN NEW.epoch IS NOT json_extract(NEW.lease, '$.epoch')
    BEGIN UPDATE leases SET epoch = json_extract(NEW.lease, '$.epoch')
          WHERE owner = NEW.owner; END;
CREATE TRIGGER leases_epoch_on_update AFTER UPDATE OF lease ON leases
    WHEN NEW.epoch IS NOT json_extract(NEW.lease, '$.epoch')
    BEGIN UPDATE leases SET epoch = json_extract(NEW.lease, '$.epoch')
          WHERE owner = NEW.owner; END;
CREATE INDEX mail_recipient ON mail (recipient, seq);
CREATE INDEX mail_sender ON mail (sender, seq);
CREATE TRIGGER mail_receipt AFTER INSERT ON mail WHEN NEW.receipt IS NOT NULL
    BEGIN UPDATE mail SET state = 'read'
          WHERE mail_id = NEW.receipt AND recipient = NEW.sender; END;
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('commands',0);
INSERT INTO "sqlite_sequence" VALUES('events',8);
COMMIT;
