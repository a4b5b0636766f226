module github.com/go-openapi/testify/v2
