"""Tools through which the agent asks the human: a typed question, or a plan to approve step by step.
An agent has them when its tools list them. A call is never run: it waits as a pause (an Approval of
kind question or plan), and what the human answers is the call's result (approvals.pauses)."""
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .tools import ToolError, tool

QuestionType = Literal["text", "choice", "multi_choice", "number", "date", "confirm", "file"]


def _never_run(**arguments) -> str:
    raise ToolError("A human answers this call; it is never run.")


def ask_human(
    question: Annotated[str, Field(description="The question, as the human will read it.")] = "",
    type: Annotated[  # noqa: A002  (the contract's name)
        QuestionType, Field(description="What kind of answer: free text, one option, several options, a number, a date (YYYY-MM-DD), "
                                        "yes/no, or a file the human uploads (its answer: the stored path and size).")
    ] = "text",
    options: Annotated[list[str] | None, Field(description="For choice and multi_choice: 2 to 20 options.")] = None,
    min: Annotated[float | None, Field(description="For number: the smallest answer allowed.")] = None,  # noqa: A002
    max: Annotated[float | None, Field(description="For number: the largest answer allowed.")] = None,  # noqa: A002
    default: Annotated[Any, Field(description="The answer suggested to the human.")] = None,
    required: Annotated[bool, Field(description="Whether an empty answer is refused.")] = True,
    message: Annotated[str | None, Field(description="For confirm: the question, if `question` is not given.")] = None,
    details: Annotated[str | None, Field(description="For confirm: what the human should know before answering.")] = None,
    confirm_label: Annotated[str | None, Field(description='For confirm: the yes button\'s words, e.g. "Delete" (default "Yes").')] = None,
    cancel_label: Annotated[str | None, Field(description='For confirm: the no button\'s words, e.g. "Go back" (default "No").')] = None,
    accept: Annotated[list[str] | None, Field(description='For file: the types taken, as MIME types or extensions, e.g. [".csv", "text/csv"] (default: any).')] = None,
    max_bytes: Annotated[int | None, Field(description="For file: the largest file taken, in bytes (capped by the site's limit).")] = None,
) -> str:
    """Ask the human a question and wait for the answer, which comes back as this call's result (JSON
    with "answer", or "declined" with a reason). Use it for a missing fact or a choice only they can make."""
    return _never_run()


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Annotated[str, Field(description="What this step does, in a few words.")]
    description: Annotated[str, Field(description="Details the human needs to decide.")] = ""
    optional: Annotated[bool, Field(description="Whether the human may drop this step and keep the others.")] = False
    tool: Annotated[str, Field(description="The tool this step calls, if any: once the plan is approved, a call of a tool "
                                           "that no approved step names waits for a human.")] = ""
    estimated_duration: Annotated[int | None, Field(description="About how long the step takes, in seconds.", gt=0)] = None


def propose_plan(
    title: Annotated[str, Field(description="What the plan achieves.")],
    steps: Annotated[list[PlanStep], Field(description="The steps, in order (1 to 20).")],
) -> str:
    """Propose a plan of several steps and wait until the human approves it (they may drop optional
    steps, reword steps or reorder them) or rejects it. The result lists the approved steps, as the
    human left them: take only those, in that order."""
    return _never_run()


def _describe_question(arguments: dict) -> str:
    return f"Asks you: {arguments.get('question') or arguments.get('message')}"


def _describe_plan(arguments: dict) -> str:
    steps = arguments.get("steps")
    count = f" ({len(steps)} step{'' if len(steps) == 1 else 's'})" if isinstance(steps, list) and steps else ""
    return f"Plan: {arguments['title']}{count}"


tool(ask_human, pause="question", describe=_describe_question)
tool(ask_human, name="request_human_input", pause="question", describe=_describe_question)
tool(propose_plan, pause="plan", describe=_describe_plan)
