"""First-party MCP server ``cloud``: AWS services through boto3 (S3, DynamoDB, EC2, SSM, Secrets Manager, SQS, SNS,
Lambda, CloudWatch Logs, KMS, IAM, STS)."""
