package activities

// ClassifyCreate is classifyCreate, for the test that holds
// docs/gateway-api.md's classification table to it.
var ClassifyCreate = classifyCreate

// AnsweredInFull is answeredInFull, for its test.
var AnsweredInFull = answeredInFull
