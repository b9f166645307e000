"""The README's quick start: an LLM team and a function agent on the offline model."""

from subagents import AgentSpec, FunctionAgent, Runtime, ScriptedModel

lead = AgentSpec(name="lead", description="Splits work and combines it.", prompt="You lead.")
worker = AgentSpec(name="worker", description="Does one part.", prompt="You work.")
model = ScriptedModel(
    {
        "lead": [
            {  # one turn, two spawns: the children run in parallel
                "tool_calls": [
                    {"name": "spawn_subagent", "input": {"agent": "worker", "task": "part A"}},
                    {"name": "spawn_subagent", "input": {"agent": "worker", "task": "part B"}},
                ]
            },
            {"text": "A: {result0_result}; B: {result1_result}"},
        ],
        "worker": [{"text": "done with {task}", "delay": 0.1}],
    }
)


async def fan_out(ctx):  # a plain Python function as an agent
    a, b = await ctx.gather(ctx.spawn("worker", "x"), ctx.spawn("worker", "y"))
    return f"{a.result} / {b.result}"


with Runtime([lead, worker, FunctionAgent.create("fan-out", fan_out)], model=model) as rt:
    outcome = rt.run("lead", "the job")
    print(outcome.status, "-", outcome.result)  # completed - A: done with part A; B: ...
    print(rt.tree(outcome.run_id).subtree_usage.total_tokens, "tokens in the tree")
    print(rt.run("fan-out", "go").result)  # done with x / done with y
