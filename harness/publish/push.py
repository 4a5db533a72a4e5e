"""`harness push`: one saved model of a run, with its model card, uploaded to a Hub repository through
huggingface_hub (HfApi.create_repo, then upload_folder). Refused in one line offline or without a token."""

from __future__ import annotations

from pathlib import Path

from foundation.infra import atomic
from foundation.infra.errors import UserError
from harness.publish.card import CARD, model_card
from harness.publish.saved import SavedModel, choose, read_run, saved_models


def check_online(repo: str) -> str:
    """The token to upload with; one line when the Hub cannot be reached by design or `repo` is malformed."""
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if "/" not in repo:
        raise UserError(f"--repo {repo!r} names no owner; pass ORG/NAME (your user name or an organisation)")
    try:
        validate_repo_id(repo)
    except HFValidationError as error:
        raise UserError(f"--repo {repo!r} is not a Hub repository id ({error}); pass ORG/NAME") from None
    if constants.HF_HUB_OFFLINE:
        raise UserError("harness push needs the Hugging Face Hub, but HF_HUB_OFFLINE is set; unset it "
                        "(HF_HUB_OFFLINE=0) on a machine that can reach huggingface.co")
    token = huggingface_hub.get_token()
    if not token:
        raise UserError("harness push needs a Hugging Face token with write access; run `hf auth login` "
                        "or set HF_TOKEN")
    return token


def push(run_dir: Path, repo: str, private: bool = False, task: str | None = None,
         seed: int | None = None) -> tuple[SavedModel, str]:
    """Upload the chosen saved model (the task's best dev seed unless `seed`) with its card; (model, URL)."""
    token = check_online(repo)
    results = read_run(run_dir)
    saved = choose(saved_models(run_dir, results), task, seed)
    if not (saved.folder / CARD).is_file():  # a card the user edited is uploaded as it is
        atomic.write_text(saved.folder / CARD, str(model_card(results, saved, repo)))
        print(f"wrote {saved.folder / CARD}")
    from huggingface_hub import HfApi
    from huggingface_hub.utils import HfHubHTTPError

    api = HfApi(token=token)
    try:
        url = api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        api.upload_folder(repo_id=repo, repo_type="model", folder_path=str(saved.folder),
                          commit_message=f"{saved.task} seed {saved.seed} from electra-harness")
    except HfHubHTTPError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"the Hub refused the upload to {repo!r} ({first}); check that the token may write "
                        "to that owner, then run the same command again") from None
    except OSError as error:  # no route to the Hub
        raise UserError(f"cannot reach the Hub to upload to {repo!r} ({error}); check the connection, then "
                        "run the same command again") from None
    return saved, str(url)
