"""Test helpers, one module per outside system or concern: fixtures (aws, git, kube), fakes (the
GitHub API, Kubernetes objects), the CLI runner, the planner's worlds and the scheduler reference."""
