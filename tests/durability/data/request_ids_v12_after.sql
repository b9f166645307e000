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
INSERT INTO "checkpoint_deltas" VALUES(3,'r1a22186c36d5db05e3293','{"run_id":"r1a22186c36d5db05e3293","step":2,"started":"toolu_y","ended":null,"answered":null}');
CREATE TABLE checkpoints (
        run_id TEXT PRIMARY KEY,
        step INTEGER NOT NULL,
        ts REAL NOT NULL,
        checkpoint TEXT NOT NULL
    );
INSERT INTO "checkpoints" VALUES('r1a22186c366ba031997bf',1,1.79585880970739126204e+09,'{"run_id":"r1a22186c366ba031997bf","step":1,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_boss_0_0","name":"spawn_subagent","input":{"agent":"lead","task":"go"}}]}],"answered":[],"started":[],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":0},"ts":1795858809.7073913}');
INSERT INTO "checkpoints" VALUES('r1a22186c36d5db05e3293',2,1.79585880972061586379e+09,'{"run_id":"r1a22186c36d5db05e3293","step":2,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_x","name":"spawn_subagent","input":{"agent":"worker","task":"A"}},{"type":"tool_use","id":"toolu_z","name":"send_message","input":{"to":"boss","content":"first"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"{\"result\":\"done A\",\"run_id\":\"r1a22186c36f6cfbb7a09d\",\"status\":\"completed\",\"usage\":{\"input_tokens\":22,\"output_tokens\":1}}"},{"type":"tool_result","tool_use_id":"toolu_z","content":"{\"mail_id\":\"m1a22186c36f282de7037e\",\"to\":\"r1a22186c366ba031997bf\"}"}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_x2","name":"spawn_subagent","input":{"agent":"worker","task":"B"}},{"type":"tool_use","id":"toolu_z2","name":"send_message","input":{"to":"boss","content":"second"}},{"type":"tool_use","id":"toolu_y","name":"crash","input":{}}]}],"answered":[],"started":[],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":0},"ts":1795858809.7206159}');
INSERT INTO "checkpoints" VALUES('r1a22186c36f6cfbb7a09d',1,1.79585880971752309795e+09,'{"run_id":"r1a22186c36f6cfbb7a09d","step":1,"messages":[{"role":"user","content":[{"type":"text","text":"A"}]},{"role":"assistant","content":[{"type":"text","text":"done A"}]}],"answered":[],"started":[],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":0},"ts":1795858809.717523}');
INSERT INTO "checkpoints" VALUES('r1a22186c379511b0b516a',1,1.79585880972479367259e+09,'{"run_id":"r1a22186c379511b0b516a","step":1,"messages":[{"role":"user","content":[{"type":"text","text":"B"}]},{"role":"assistant","content":[{"type":"text","text":"done B"}]}],"answered":[],"started":[],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":0},"ts":1795858809.7247937}');
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
INSERT INTO "events" VALUES(1,'r1a22186c366ba031997bf','spawned',1.79585880970269203189e+09,'{"kind":"spawned","run_id":"r1a22186c366ba031997bf","agent":"boss","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"ts":1795858809.702692,"data":{"task":"go","background":false}}');
INSERT INTO "events" VALUES(2,'r1a22186c366ba031997bf','started',1.79585880970280218119e+09,'{"kind":"started","run_id":"r1a22186c366ba031997bf","agent":"boss","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"ts":1795858809.7028022,"data":{"model":"sonnet","resumed":false}}');
INSERT INTO "events" VALUES(3,'r1a22186c366ba031997bf','step',1.79585880970746421814e+09,'{"kind":"step","run_id":"r1a22186c366ba031997bf","agent":"boss","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"ts":1795858809.7074642,"data":{"step":1,"input_tokens":23,"output_tokens":10}}');
INSERT INTO "events" VALUES(4,'r1a22186c366ba031997bf','tool_call',1.79585880970924615862e+09,'{"kind":"tool_call","run_id":"r1a22186c366ba031997bf","agent":"boss","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"ts":1795858809.7092462,"data":{"tool":"spawn_subagent","input":{"agent":"lead","task":"go"}}}');
INSERT INTO "events" VALUES(5,'r1a22186c36d5db05e3293','spawned',1.79585880970953607558e+09,'{"kind":"spawned","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.709536,"data":{"task":"go","background":false}}');
INSERT INTO "events" VALUES(6,'r1a22186c36d5db05e3293','started',1.79585880970963668824e+09,'{"kind":"started","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.7096367,"data":{"model":"sonnet","resumed":false}}');
INSERT INTO "events" VALUES(7,'r1a22186c366ba031997bf','waiting',1.79585880970994925505e+09,'{"kind":"waiting","run_id":"r1a22186c366ba031997bf","agent":"boss","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"ts":1795858809.7099493,"data":{}}');
INSERT INTO "events" VALUES(8,'r1a22186c36d5db05e3293','step',1.79585880971075606341e+09,'{"kind":"step","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.710756,"data":{"step":1,"input_tokens":23,"output_tokens":21}}');
INSERT INTO "events" VALUES(9,'r1a22186c36d5db05e3293','tool_call',1.79585880971114492414e+09,'{"kind":"tool_call","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.711145,"data":{"tool":"spawn_subagent","input":{"agent":"worker","task":"A"}}}');
INSERT INTO "events" VALUES(10,'r1a22186c36f6cfbb7a09d','spawned',1.79585880971132850645e+09,'{"kind":"spawned","run_id":"r1a22186c36f6cfbb7a09d","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.7113285,"data":{"task":"A","background":false}}');
INSERT INTO "events" VALUES(11,'r1a22186c36f6cfbb7a09d','started',1.79585880971139454846e+09,'{"kind":"started","run_id":"r1a22186c36f6cfbb7a09d","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.7113945,"data":{"model":"sonnet","resumed":false}}');
INSERT INTO "events" VALUES(12,'r1a22186c36d5db05e3293','tool_call',1.79585880971162199976e+09,'{"kind":"tool_call","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.711622,"data":{"tool":"send_message","input":{"to":"boss","content":"first"}}}');
INSERT INTO "events" VALUES(13,'r1a22186c36d5db05e3293','mail_sent',1.79585880971181583408e+09,'{"kind":"mail_sent","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.7118158,"data":{"mail_id":"m1a22186c36f282de7037e","recipient":"r1a22186c366ba031997bf"}}');
INSERT INTO "events" VALUES(14,'r1a22186c366ba031997bf','mail_delivered',1.79585880971181774141e+09,'{"kind":"mail_delivered","run_id":"r1a22186c366ba031997bf","agent":"boss","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"ts":1795858809.7118177,"data":{"mail_id":"m1a22186c36f282de7037e","sender":"r1a22186c36d5db05e3293"}}');
INSERT INTO "events" VALUES(15,'r1a22186c36d5db05e3293','waiting',1.7958588097118909359e+09,'{"kind":"waiting","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.711891,"data":{}}');
INSERT INTO "events" VALUES(16,'r1a22186c36f6cfbb7a09d','step',1.79585880971779036519e+09,'{"kind":"step","run_id":"r1a22186c36f6cfbb7a09d","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.7177904,"data":{"step":1,"input_tokens":22,"output_tokens":1}}');
INSERT INTO "events" VALUES(17,'r1a22186c36f6cfbb7a09d','completed',1.79585880971782970425e+09,'{"kind":"completed","run_id":"r1a22186c36f6cfbb7a09d","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.7178297,"data":{"error_kind":null,"error":null,"steps":1,"tool_calls":0,"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1}}}');
INSERT INTO "events" VALUES(18,'r1a22186c36d5db05e3293','step',1.79585880972094607353e+09,'{"kind":"step","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.720946,"data":{"step":2,"input_tokens":91,"output_tokens":23}}');
INSERT INTO "events" VALUES(19,'r1a22186c36d5db05e3293','tool_call',1.79585880972128295899e+09,'{"kind":"tool_call","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.721283,"data":{"tool":"spawn_subagent","input":{"agent":"worker","task":"B"}}}');
INSERT INTO "events" VALUES(20,'r1a22186c379511b0b516a','spawned',1.79585880972143268588e+09,'{"kind":"spawned","run_id":"r1a22186c379511b0b516a","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.7214327,"data":{"task":"B","background":false}}');
INSERT INTO "events" VALUES(21,'r1a22186c379511b0b516a','started',1.79585880972148704531e+09,'{"kind":"started","run_id":"r1a22186c379511b0b516a","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.721487,"data":{"model":"sonnet","resumed":false}}');
INSERT INTO "events" VALUES(22,'r1a22186c36d5db05e3293','tool_call',1.79585880972443652156e+09,'{"kind":"tool_call","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.7244365,"data":{"tool":"send_message","input":{"to":"boss","content":"second"}}}');
INSERT INTO "events" VALUES(23,'r1a22186c36d5db05e3293','mail_sent',1.79585880972496747965e+09,'{"kind":"mail_sent","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.7249675,"data":{"mail_id":"m1a22186c37c75c0b20d7a","recipient":"r1a22186c366ba031997bf"}}');
INSERT INTO "events" VALUES(24,'r1a22186c366ba031997bf','mail_delivered',1.79585880972496938707e+09,'{"kind":"mail_delivered","run_id":"r1a22186c366ba031997bf","agent":"boss","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"ts":1795858809.7249694,"data":{"mail_id":"m1a22186c37c75c0b20d7a","sender":"r1a22186c36d5db05e3293"}}');
INSERT INTO "events" VALUES(25,'r1a22186c36d5db05e3293','tool_call',1.79585880972503280639e+09,'{"kind":"tool_call","run_id":"r1a22186c36d5db05e3293","agent":"lead","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"ts":1795858809.7250328,"data":{"tool":"crash","input":{}}}');
INSERT INTO "events" VALUES(26,'r1a22186c379511b0b516a','step',1.79585880972508835787e+09,'{"kind":"step","run_id":"r1a22186c379511b0b516a","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.7250884,"data":{"step":1,"input_tokens":22,"output_tokens":1}}');
INSERT INTO "events" VALUES(27,'r1a22186c379511b0b516a','completed',1.79585880972511625292e+09,'{"kind":"completed","run_id":"r1a22186c379511b0b516a","agent":"worker","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"ts":1795858809.7251163,"data":{"error_kind":null,"error":null,"steps":1,"tool_calls":0,"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1}}}');
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
INSERT INTO "leases" VALUES('vm:7346:e5c51d7f','vm',7346,1.7958588097011110782e+09,1.79585882470111107825e+09,'{"owner":"vm:7346:e5c51d7f","host":"vm","pid":7346,"machine":"vm|fb18aecd-afe8-4049-b9da-e861b5001147|pid:[4026531836]","started_at":1795858809.7010963,"renewed_at":1795858809.701111,"expires_at":1795858824.701111,"expires_boot":64961.825261145,"epoch":1}',1);
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
INSERT INTO "mail" VALUES(1,'m1a22186c36f282de7037e','r1a22186c36d5db05e3293','r1a22186c366ba031997bf','delivered',1.79585880971166276937e+09,'{"mail_id":"m1a22186c36f282de7037e","sender":"r1a22186c36d5db05e3293","recipient":"r1a22186c366ba031997bf","content":"first","sender_agent":"lead","reply_to":null,"sent_at":1795858809.7116628,"state":"delivered","request_id":"toolu_z","topic":null}',NULL,NULL,NULL);
INSERT INTO "mail" VALUES(2,'m1a22186c37c75c0b20d7a','r1a22186c36d5db05e3293','r1a22186c366ba031997bf','delivered',1.79585880972449612614e+09,'{"mail_id":"m1a22186c37c75c0b20d7a","sender":"r1a22186c36d5db05e3293","recipient":"r1a22186c366ba031997bf","content":"second","sender_agent":"lead","reply_to":null,"sent_at":1795858809.7244961,"state":"delivered","request_id":"toolu_z2","topic":null}',NULL,NULL,NULL);
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
INSERT INTO "outcomes" VALUES(1,'r1a22186c36f6cfbb7a09d','completed',1,'{"run_id":"r1a22186c36f6cfbb7a09d","status":"completed","result":"done A","error_kind":null,"error":null,"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"typed":false}');
INSERT INTO "outcomes" VALUES(2,'r1a22186c379511b0b516a','completed',1,'{"run_id":"r1a22186c379511b0b516a","status":"completed","result":"done B","error_kind":null,"error":null,"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"typed":false}');
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
INSERT INTO "runs" VALUES('r1a22186c366ba031997bf','boss','waiting','r1a22186c366ba031997bf',NULL,0,1.79585880970269203189e+09,NULL,'{"run_id":"r1a22186c366ba031997bf","agent":"boss","task":"go","root_run_id":"r1a22186c366ba031997bf","parent_run_id":null,"depth":0,"context":null,"label":null,"model":"sonnet","status":"waiting","background":false,"created_at":1795858809.702692,"started_at":1795858809.7028022,"ended_at":null,"deadline_s":300.0,"outcome":null,"usage":{"input_tokens":23,"output_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"tool_calls":1,"restarts":0,"cleanup":"keep","request_id":"r1a22186c366ba031997bf","owner":"vm:7346:e5c51d7f","node":null,"token_budget":null,"cost_budget_usd":null,"on_failure":"report","retries":0,"shared":{},"ceiling":[{"agent":"runtime","run_id":"vm:7346:e5c51d7f","mode":"bypassPermissions"}],"continues":null,"approvals_in_store":false,"detached":false,"answered_by":null}',NULL,'keep',0,0);
INSERT INTO "runs" VALUES('r1a22186c36d5db05e3293','lead','running','r1a22186c366ba031997bf','r1a22186c366ba031997bf',1,1.79585880970953607558e+09,NULL,'{"run_id":"r1a22186c36d5db05e3293","agent":"lead","task":"go","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c366ba031997bf","depth":1,"context":null,"label":null,"model":"sonnet","status":"running","background":false,"created_at":1795858809.709536,"started_at":1795858809.7096367,"ended_at":null,"deadline_s":300.0,"outcome":null,"usage":{"input_tokens":114,"output_tokens":44,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":2},"steps":2,"tool_calls":5,"restarts":0,"cleanup":"keep","request_id":"toolu_boss_0_0","owner":"vm:7346:e5c51d7f","node":null,"token_budget":null,"cost_budget_usd":null,"on_failure":"report","retries":0,"shared":{},"ceiling":[{"agent":"runtime","run_id":"vm:7346:e5c51d7f","mode":"bypassPermissions"},{"agent":"boss","run_id":"r1a22186c366ba031997bf"}],"continues":null,"approvals_in_store":false,"detached":false,"answered_by":null}',NULL,'keep',0,0);
INSERT INTO "runs" VALUES('r1a22186c36f6cfbb7a09d','worker','completed','r1a22186c366ba031997bf','r1a22186c36d5db05e3293',2,1.79585880971132850645e+09,1.79585880971782970425e+09,'{"run_id":"r1a22186c36f6cfbb7a09d","agent":"worker","task":"A","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"context":null,"label":null,"model":"sonnet","status":"completed","background":false,"created_at":1795858809.7113285,"started_at":1795858809.7113945,"ended_at":1795858809.7178297,"deadline_s":300.0,"outcome":{"run_id":"r1a22186c36f6cfbb7a09d","status":"completed","result":"done A","error_kind":null,"error":null,"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"typed":false},"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"tool_calls":0,"restarts":0,"cleanup":"keep","request_id":"toolu_x","owner":"vm:7346:e5c51d7f","node":null,"token_budget":null,"cost_budget_usd":null,"on_failure":"report","retries":0,"shared":{},"ceiling":[{"agent":"runtime","run_id":"vm:7346:e5c51d7f","mode":"bypassPermissions"},{"agent":"boss","run_id":"r1a22186c366ba031997bf"},{"agent":"lead","run_id":"r1a22186c36d5db05e3293"}],"continues":null,"approvals_in_store":false,"detached":false,"answered_by":null}',NULL,'keep',0,0);
INSERT INTO "runs" VALUES('r1a22186c379511b0b516a','worker','completed','r1a22186c366ba031997bf','r1a22186c36d5db05e3293',2,1.79585880972143268588e+09,1.79585880972511625292e+09,'{"run_id":"r1a22186c379511b0b516a","agent":"worker","task":"B","root_run_id":"r1a22186c366ba031997bf","parent_run_id":"r1a22186c36d5db05e3293","depth":2,"context":null,"label":null,"model":"sonnet","status":"completed","background":false,"created_at":1795858809.7214327,"started_at":1795858809.721487,"ended_at":1795858809.7251163,"deadline_s":300.0,"outcome":{"run_id":"r1a22186c379511b0b516a","status":"completed","result":"done B","error_kind":null,"error":null,"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"typed":false},"usage":{"input_tokens":22,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.0,"model_calls":1},"steps":1,"tool_calls":0,"restarts":0,"cleanup":"keep","request_id":"toolu_x2","owner":"vm:7346:e5c51d7f","node":null,"token_budget":null,"cost_budget_usd":null,"on_failure":"report","retries":0,"shared":{},"ceiling":[{"agent":"runtime","run_id":"vm:7346:e5c51d7f","mode":"bypassPermissions"},{"agent":"boss","run_id":"r1a22186c366ba031997bf"},{"agent":"lead","run_id":"r1a22186c36d5db05e3293"}],"continues":null,"approvals_in_store":false,"detached":false,"answered_by":null}',NULL,'keep',0,0);
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
CREATE INDEX mail_recipient ON mail (recipient, seq);
CREATE INDEX mail_sender ON mail (sender, seq);
CREATE TRIGGER leases_epoch_on_insert AFTER INSERT ON leases
    WHEN NEW.epoch IS NOT json_extract(NEW.lease, '$.epoch')
    BEGIN UPDATE leases SET epoch = json_extract(NEW.lease, '$.epoch')
          WHERE owner = NEW.owner; END;
CREATE TRIGGER leases_epoch_on_update AFTER UPDATE OF lease ON leases
    WHEN NEW.epoch IS NOT json_extract(NEW.lease, '$.epoch')
    BEGIN UPDATE leases SET epoch = json_extract(NEW.lease, '$.epoch')
          WHERE owner = NEW.owner; END;
CREATE TRIGGER mail_receipt AFTER INSERT ON mail WHEN NEW.receipt IS NOT NULL
    BEGIN UPDATE mail SET state = 'read'
          WHERE mail_id = NEW.receipt AND recipient = NEW.sender; END;
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('commands',0);
INSERT INTO "sqlite_sequence" VALUES('events',27);
INSERT INTO "sqlite_sequence" VALUES('outcomes',2);
INSERT INTO "sqlite_sequence" VALUES('checkpoint_deltas',3);
COMMIT;
