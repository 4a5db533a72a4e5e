"""Pre-training runs (`harness pretrain`) as the CLI and experiments start them."""
