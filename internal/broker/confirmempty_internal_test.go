package broker

// ConfirmEmpty lets the live tests (package broker_test, which may import
// brokertest) call confirmEmpty.
var ConfirmEmpty = confirmEmpty
